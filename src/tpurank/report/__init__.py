"""What the reports are made of: the validation report's plots, training curves, ensemble section
and reference scores (the report itself is the validate stage's, validate/), and the commands that
compare runs (`runs`), show the config (`config`) and set synthetic data beside real (`compare-synth`)."""
