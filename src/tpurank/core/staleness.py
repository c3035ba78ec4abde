"""The one answer to "is it up to date?": a content key, what a stage declares, and `current`.

A stage that keeps a record has a `StageIO` (tpurank.core.declared): the files it reads, the files it
writes and the config sections that change its result. The step records (tpurank.run.records) key
a stage run with `content_key` over that declaration. The finer caches inside a stage (one prepared
graph, one feature table, one model's checkpoint, one collection's predictions) key their piece with
`StageIO.piece_key` on the same declaration, which refuses a file or a config section the stage does
not declare: a change to what a stage reads is made in its declaration and nowhere else.

Whether work is skipped is decided by `current` alone, for a stage and for every finer cache: the
key stored beside a result equals the key now, and the result is whole.
"""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any

from tpurank.core.config import Config, to_dict
from tpurank.core.errors import DataError
from tpurank.core.identity import file_digest, file_identity
from tpurank.core.links import not_a_file

KEY_CHARS = 32  # hex characters of a key: 128 bits, far from any collision at our file counts
SEED = "seed"  # the config's seed: keyed by every stage record, so any piece may key on it too


def current(stored: object, key: str, outputs: Iterable[Path] = (), whole: bool = True) -> bool:
    """Whether work can be skipped: the one place the project decides it (docs/architecture.md,
    "Where work is skipped").

    Args:
        stored: the key saved beside the result when it was made (None or anything else: no result).
        key: the key of what it would be made from now.
        outputs: the result's files; each must still be there.
        whole: what else the caller knows of the result's completeness (a checkpoint marked
            complete, a prediction for every expected graph).
    """
    return isinstance(stored, str) and stored == key and whole and all(Path(f).exists() for f in outputs)


@dataclass(frozen=True)
class Files:
    """Files a stage reads or writes: everything under `root` (or `root` itself), or the matches
    of `pattern` below it; `exclude` leaves out one top-level folder (the ensemble's own output).

    Args:
        root: a file or a folder.
        pattern: a glob below `root` ("" = every file).
        exclude: a top-level folder of `root` to leave out.
        lock: lock its folder while the stage writes (False for files named per run in a shared
            folder, as each model's submission CSV: two models may predict at once).
    """

    root: Path
    pattern: str = ""
    exclude: str = ""
    lock: bool = True

    def _matches(self) -> list[Path]:
        """Every entry below `root` it names, of any kind; hidden ones (locks, temporary files) left out."""
        if self.pattern:
            found = self.root.glob(self.pattern) if self.root.is_dir() else []
        elif not self.root.is_dir():
            return [self.root] if self.root.exists() or self.root.is_symlink() else []
        else:
            found = self.root.rglob("*")
        keep = []
        for f in found:
            rel = f.relative_to(self.root).parts if f != self.root else ()
            if any(p.startswith(".") for p in rel) or (self.exclude and rel and rel[0] == self.exclude):
                continue
            keep.append(f)
        return sorted(keep)

    def list(self) -> list[Path]:
        """The regular files (through links), sorted; hidden ones left out."""
        return [f for f in self._matches() if f.is_file()]

    def strays(self) -> list[Path]:
        """The entries it names that are not regular files: a FIFO, a socket, a dangling link, a link
        loop, or a folder that a pattern names (`x.npz`); the folders of a whole tree are its shape.

        A stage reports such an entry (prepare: "a folder: skipped"), so its key must change when one
        comes or goes, or a rerun would say "up to date" without looking (files_identity)."""
        return [
            f
            for f in self._matches()
            if not f.is_file() and (self.pattern or f == self.root or not f.is_dir())
        ]

    def folder(self) -> Path:
        """The folder these files live in (what a run locks while it writes them)."""
        return self.root if self.pattern or self.root.is_dir() or not self.root.suffix else self.root.parent


def option(
    default: Any = MISSING, *, result: bool = True, factory: Any = MISSING, positional: bool = False
) -> Any:
    """A field of a stage's `Options` dataclass; `result=False` marks an option that never changes
    what the stage writes (how fast, whether progress shows, --force): it stays out of its record.
    `positional`: typed without a flag on the command line."""
    return field(
        default=default, default_factory=factory, metadata={"result": result, "positional": positional}
    )


@dataclass(frozen=True)
class StageIO:
    """What one stage run reads, writes and depends on: its whole declaration.

    Args:
        reads: the files it opens.
        writes: the files it writes (their folders are locked while it runs).
        sections: the config sections it reads (per-collection tables count for these only).
        record: keep a step record (False: the folders are only locked while it writes).
    """

    reads: list[Files]
    writes: list[Files]
    sections: tuple[str, ...] = ()
    record: bool = True

    def lock_folders(self) -> list[Path]:
        """The folders written, each once, in order."""
        return list(dict.fromkeys(f.folder() for f in self.writes if f.lock))

    def config_key(self, cfg: Config) -> str:
        """The key of the config sections the stage reads (with the seed, and of the per-collection
        tables only those sections: a new GNN time budget does not make the prepared cache stale)."""
        d = to_dict(cfg)
        over = {c: {s: v for s, v in t.items() if s in self.sections} for c, t in d["collections"].items()}
        config = {s: d.get(s) for s in self.sections}
        return content_key({"seed": cfg.seed, "config": config, "overrides": over})

    def section_keys(self, cfg: Config) -> dict[str, str]:
        """The key of the seed and of each section the stage reads, alone (its per-collection values
        with it): what a rerun names as its reason."""
        d = to_dict(cfg)
        over = {s: {c: t.get(s) for c, t in d["collections"].items()} for s in self.sections}
        return {
            SEED: content_key({"seed": cfg.seed}),
            **{s: content_key({s: d.get(s), "over": over[s]}) for s in self.sections},
        }

    def piece_key(
        self,
        parts: Mapping[str, Any],
        files: Iterable[Path | Files] = (),
        cfg: Config | None = None,
        sections: tuple[str, ...] = (),
    ) -> str:
        """The key of one piece of this stage's work kept between runs (one prepared graph, one
        feature table, one model, one collection's predictions): `content_key` over `parts`, the
        config `sections` of `cfg` it reads and the content of `files`.

        Args:
            parts: what else changes the piece (its name, a format version, a setting).
            files: what it is made from: each below a file the stage declares it reads or writes
                (a piece may summarise the stage's own outputs, as `seeds.json` its members).
            cfg: the config the piece is made with (a collection's, overrides applied).
            sections: the sections of `cfg` it reads: each one the stage declares, or `SEED`.

        Raises:
            ValueError: a file or a section the declaration lacks (a bug: the step's record would
                not see it change).
        """
        files = list(files)
        self._check_declared(files, sections)
        if sections:
            if cfg is None:
                raise ValueError(f"piece_key: sections {sections} named without a config")
            d = to_dict(cfg)
            parts = {**parts, "config": {s: d[s] for s in sections}}
        return content_key(parts, files)

    def _check_declared(self, files: list[Path | Files], sections: tuple[str, ...]) -> None:
        roots = [g.root for g in (*self.reads, *self.writes)]
        for f in files:
            path = f.root if isinstance(f, Files) else Path(f)
            if not any(path == r or path.is_relative_to(r) for r in roots):
                raise ValueError(f"piece_key: {path} is not below a file the stage declares")
        undeclared = [s for s in sections if s != SEED and s not in self.sections]
        if undeclared:
            raise ValueError(f"piece_key: config section {undeclared[0]!r} is not one the stage declares")


_MEMO: dict[tuple, str] = {}


def remembered_identity(f: Path) -> str:
    """file_identity, remembered for this process while the file keeps its inode, size and times (a
    rewrite, always by rename here, makes a new inode): a run names each file once."""
    st = f.stat()
    memo = (str(f), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if memo not in _MEMO:
        try:
            _MEMO[memo] = file_identity(f)
        except DataError:  # a broken npz is the stage's to report, in its own words
            _MEMO[memo] = file_digest(f) if stat.S_ISREG(st.st_mode) else "not a regular file"
    return _MEMO[memo]


def files_identity(groups: Iterable[Files]) -> str:
    """One digest over every file of `groups` (relative path and content identity) and over the
    listing of the entries it names that are not regular files (relative path and what they are:
    `Files.strays`), so an entry a stage reports is never missed by an "up to date"."""
    h = hashlib.sha256()
    for g in groups:
        h.update(f"[{g.root.name}:{g.pattern}:{g.exclude}]\n".encode())
        for f in g.list():
            rel = f.relative_to(g.root).as_posix() if f != g.root else f.name
            h.update(f"{rel}\0{remembered_identity(f)}\n".encode())
        for f in g.strays():  # never opened: a FIFO would block
            rel = f.relative_to(g.root).as_posix() if f != g.root else f.name
            h.update(f"{rel}\0{not_a_file(f)}\n".encode())
    return h.hexdigest()[:KEY_CHARS]


def content_key(parts: Mapping[str, Any], files: Iterable[Path | Files] = ()) -> str:
    """The key of one result: `parts` (settings, versions, identities already known) and the content
    of `files` (a missing file counts as missing). Equal keys mean the result is still valid.

    Args:
        parts: JSON-able values that change the result.
        files: files (or groups of files) the result is computed from.
    """
    named = []
    for f in files:
        if isinstance(f, Files):
            named.append(("group", files_identity([f])))
        else:
            f = Path(f)
            named.append((f.name, remembered_identity(f) if f.exists() else "missing"))
    text = json.dumps({"parts": parts, "files": named}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_CHARS]
