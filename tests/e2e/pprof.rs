//! `export --format pprof` read back by a real pprof reader (issue 18):
//! `go tool pprof -raw` (Debian's golang package; `.ci/run` installs it,
//! and the test skips, saying so, without it). Its samples' flat time and
//! calls per function are the report's tottime and ncalls.

use std::collections::BTreeMap;

use crate::util::{mtanalyze, repo_file, vector, TempDir};

/// (time, calls) per leaf function from `go tool pprof -raw`'s output.
fn flat_by_function(raw: &str) -> BTreeMap<String, (u64, u64)> {
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    for line in raw.lines().skip_while(|l| *l != "Locations").skip(1) {
        // `     3: 0x0 M=1 fib crates/x/workload.rs:94 s=94`
        let Some((id, rest)) = line.trim().split_once(": ") else {
            break;
        };
        let Ok(id) = id.parse::<u64>() else { break };
        let rest = rest.rsplit_once(" s=").map_or(rest, |(r, _)| r);
        let rest = rest.split_once("M=1 ").map_or(rest, |(_, r)| r);
        // The name, then ` file:line` (files here have no spaces).
        let name = rest.rsplit_once(' ').map_or(rest, |(n, _)| n);
        names.insert(id, name.to_owned());
    }
    let mut flat: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let samples = raw
        .lines()
        .skip_while(|l| !l.starts_with("time/nanoseconds"))
        .skip(1)
        .take_while(|l| l.contains(':'));
    for line in samples {
        let (values, locations) = line.split_once(':').expect("`values: locations`");
        let v: Vec<u64> = values
            .split_whitespace()
            .map(|x| x.parse().expect("a value"))
            .collect();
        let leaf: u64 = locations
            .split_whitespace()
            .next()
            .and_then(|l| l.parse().ok())
            .expect("a leaf location");
        let e = flat.entry(names[&leaf].clone()).or_default();
        e.0 += v[0];
        e.1 += v[1];
    }
    flat
}

#[test]
fn go_tool_pprof_reads_the_export_and_its_flat_values_are_tottime_and_ncalls() {
    let go = std::process::Command::new("go").arg("version").output();
    if !go.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: `go` (Debian's golang-go) is not installed to read the pprof export");
        return;
    }
    let dir = TempDir::new("pprof");
    let traces = [
        repo_file("sample-traces/workload.bin"),
        vector("recursion-b.jsonl"),
        vector("fibers.jsonl"),
    ];
    for trace in traces {
        for clock in ["stack", "wall"] {
            let out = dir.join("profile.pb.gz");
            mtanalyze([
                "export".as_ref(),
                trace.as_os_str(),
                "--format".as_ref(),
                "pprof".as_ref(),
                "--clock".as_ref(),
                clock.as_ref(),
                "-o".as_ref(),
                out.as_os_str(),
            ])
            .success();
            let raw = std::process::Command::new("go")
                .args(["tool", "pprof", "-raw"])
                .arg(&out)
                .env("HOME", dir.path())
                .output()
                .expect("go tool pprof runs");
            let text = String::from_utf8_lossy(&raw.stdout);
            assert!(
                raw.status.success(),
                "{}",
                String::from_utf8_lossy(&raw.stderr)
            );
            let report = mtanalyze([
                trace.as_os_str(),
                "--format".as_ref(),
                "json".as_ref(),
                "--clock".as_ref(),
                clock.as_ref(),
            ])
            .success()
            .json();
            let mut want: BTreeMap<String, (u64, u64)> = BTreeMap::new();
            for f in report["functions"].as_array().into_iter().flatten() {
                let e = want
                    .entry(f["function"].as_str().unwrap_or_default().to_owned())
                    .or_default();
                e.0 += f["tottime_ns"].as_u64().unwrap_or(0);
                e.1 += f["ncalls"].as_u64().unwrap_or(0);
            }
            want.retain(|_, v| *v != (0, 0));
            assert_eq!(
                flat_by_function(&text),
                want,
                "{} --clock {clock}",
                trace.display()
            );
        }
    }
}
