.PHONY: test-programs
test-programs:
