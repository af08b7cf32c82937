module idem-harness/tests/faketime/static-clock

go 1.22
