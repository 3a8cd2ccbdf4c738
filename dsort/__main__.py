from dsort.cli import run

run()
