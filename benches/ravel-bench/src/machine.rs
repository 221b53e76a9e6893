//! Facts about the machine a result was measured on.

use crate::result::Machine;

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

pub fn facts() -> Machine {
    let cpuinfo = read("/proc/cpuinfo");
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    Machine {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        mem_total_kb: ravel_tier::parse_meminfo(&read("/proc/meminfo")).unwrap_or(0) / 1024,
        cpu_model,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
    }
}
