//! Small real programs that the tests and the VM test bed run under smcrun, each printing what it
//! observed in `key=value` lines that the tests assert on.
