//! The per-process report, as `smcrun ps` reads it from a file another process wrote: any bytes
//! are a report, nothing yet, or an error, never a panic; a report read whole writes back to bytes
//! that read as the same report.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(mut r)) = smcrun_report::parse(data) {
        let _ = r.summary_line();
        let bytes = r.to_bytes();
        assert_eq!(smcrun_report::parse(&bytes), Ok(Some(r)));
    }
});
