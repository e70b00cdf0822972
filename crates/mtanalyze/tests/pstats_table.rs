//! The pstats statistics of a report with numbered edges are those of its
//! full report: the binding builds a profile's `pstats` dict from
//! [`mtanalyze::report::analyze_compact`], the command line's pstats file
//! from [`mtanalyze::analyze`].

use std::path::Path;

use mtanalyze::render::pstats::{Counts, Key, PstatsTable};
use mtanalyze::report::{analyze_compact, Clock};
use mtanalyze::{analyze, load, AnalyzeOptions};

type Entry<'r> = (Key<'r>, Counts, Vec<(Key<'r>, Counts)>);

fn entries<'r>(table: &PstatsTable<'r>) -> Vec<Entry<'r>> {
    let mut out = Vec::new();
    table
        .for_each(|key, counts, callers| -> Result<(), ()> {
            let callers = callers
                .iter()
                .map(|((_, caller), c)| (*caller, *c))
                .collect();
            out.push((key, counts, callers));
            Ok(())
        })
        .expect("no entry fails");
    out
}

#[test]
fn numbered_edges_give_the_full_report_s_statistics() {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sample-traces");
    for name in ["workload.bin", "workload-v4.bin", "workload-ring.bin"] {
        let trace = load(&samples.join(name)).expect("a sample trace");
        for clock in [Clock::Wall, Clock::Stack, Clock::Gil] {
            let options = AnalyzeOptions {
                clock: Some(clock),
                ..AnalyzeOptions::default()
            };
            let report = analyze(&trace, &options).expect("analyzed");
            let compact = analyze_compact(&trace, &options).expect("analyzed");
            let (full, numbered) = (PstatsTable::of(&report), PstatsTable::of_compact(&compact));
            let want = entries(&full);
            assert!(
                want.iter().any(|(_, _, callers)| !callers.is_empty()),
                "{name}: the sample has calls between functions"
            );
            assert_eq!(entries(&numbered), want, "{name} under {clock:?}");
        }
    }
}
