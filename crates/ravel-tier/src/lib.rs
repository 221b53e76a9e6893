//! Machine tiers: the load geometry that fits the memory of the machine.
//!
//! The geometry of a load (target object size, upload pipeline depth, load budget, age trigger)
//! is chosen from the memory the process may use: `MemTotal` from `/proc/meminfo`, or the cgroup
//! memory limit when that is lower. Every value is a default; callers override it with flags.
//!
//! | memory (kB, decimal GB)        | object    | depth | load budget       | age  |
//! |--------------------------------|-----------|-------|-------------------|------|
//! | ≥ 30,000,000                   | 46 MB     | 56    | 14,000,000,000    | 60 s |
//! | 15,000,000 – 30,000,000        | 24 MB     | 32    | 6,500,000,000     | 60 s |
//! | 7,000,000 – 15,000,000         | 24 MB     | 24    | 3,500,000,000     | 60 s |
//! | 3,000,000 – 7,000,000          | 24 MB     | 16    | 1,200,000,000     | 60 s |
//! | < 3,000,000                    | 24 MB     | 8     | half of memory    | 60 s |

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

/// Errors reading the machine's memory facts.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TierError {
    #[error("{source_name}: {message}")]
    Malformed {
        source_name: String,
        message: String,
    },
    #[error("cannot read {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The named tiers, by the memory the process may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TierName {
    /// ≥ 30,000,000 kB.
    Large,
    /// 15 – 30 GB.
    Medium,
    /// 7 – 15 GB.
    Small,
    /// 3 – 7 GB.
    Tiny,
    /// < 3 GB.
    Minimal,
}

impl fmt::Display for TierName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            TierName::Large => "large (>= 30 GB)",
            TierName::Medium => "medium (15-30 GB)",
            TierName::Small => "small (7-15 GB)",
            TierName::Tiny => "tiny (3-7 GB)",
            TierName::Minimal => "minimal (< 3 GB)",
        };
        f.write_str(s)
    }
}

/// Where the memory figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    MemTotal,
    CgroupLimit,
}

/// The memory facts a tier is chosen from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryFacts {
    /// `MemTotal` of `/proc/meminfo`, in bytes.
    pub mem_total_bytes: u64,
    /// The cgroup memory limit in bytes, when one is set.
    pub cgroup_limit_bytes: Option<u64>,
}

impl MemoryFacts {
    /// The memory the process may use: `MemTotal`, or the cgroup limit when lower.
    pub fn effective_bytes(&self) -> (u64, MemorySource) {
        match self.cgroup_limit_bytes {
            Some(limit) if limit < self.mem_total_bytes => (limit, MemorySource::CgroupLimit),
            _ => (self.mem_total_bytes, MemorySource::MemTotal),
        }
    }
}

/// The load geometry of a tier. Every field is a default that a flag may override.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Tier {
    pub name: TierName,
    /// Memory the tier was chosen from, in bytes.
    pub memory_bytes: u64,
    pub memory_source: MemorySource,
    /// Target stored size of one object (one Parquet file, one row group), in bytes.
    pub object_bytes: u64,
    /// Objects in flight in the upload pipeline at most.
    pub pipeline_depth: usize,
    /// Bytes the loader may hold at once, from decoded batches to objects awaiting upload.
    pub load_budget: u64,
    /// A buffer whose oldest row is this old is flushed.
    #[serde(serialize_with = "ser_secs")]
    pub max_flush_delay: Duration,
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}

const KB: u64 = 1000;
const GB_AS_KB: u64 = 1_000_000;
/// Threshold of the top tier, in kB of `MemTotal`.
pub const LARGE_TIER_KB: u64 = 30 * GB_AS_KB;

impl Tier {
    /// The tier for this much usable memory (bytes).
    pub fn for_memory(memory_bytes: u64, memory_source: MemorySource) -> Tier {
        let kb = memory_bytes / 1024;
        let (name, object_bytes, pipeline_depth, load_budget) = if kb >= LARGE_TIER_KB {
            (TierName::Large, 46_000_000, 56, 14_000_000_000)
        } else if kb >= 15 * GB_AS_KB {
            (TierName::Medium, 24_000_000, 32, 6_500_000_000)
        } else if kb >= 7 * GB_AS_KB {
            (TierName::Small, 24_000_000, 24, 3_500_000_000)
        } else if kb >= 3 * GB_AS_KB {
            (TierName::Tiny, 24_000_000, 16, 1_200_000_000)
        } else {
            (TierName::Minimal, 24_000_000, 8, memory_bytes / 2)
        };
        Tier {
            name,
            memory_bytes,
            memory_source,
            object_bytes,
            pipeline_depth,
            load_budget,
            max_flush_delay: Duration::from_secs(60),
        }
    }

    /// The tier for the given memory facts.
    pub fn from_facts(facts: &MemoryFacts) -> Tier {
        let (bytes, source) = facts.effective_bytes();
        Tier::for_memory(bytes, source)
    }

    /// The tier for given `/proc/meminfo` text and optional cgroup limit text.
    pub fn from_texts(meminfo: &str, cgroup: Option<&str>) -> Result<Tier, TierError> {
        let mem_total_bytes = parse_meminfo(meminfo)?;
        let cgroup_limit_bytes = match cgroup {
            Some(text) => parse_cgroup_limit(text)?,
            None => None,
        };
        Ok(Tier::from_facts(&MemoryFacts {
            mem_total_bytes,
            cgroup_limit_bytes,
        }))
    }

    /// Reads this machine's `/proc/meminfo` and cgroup limit (v2 `memory.max`, else v1
    /// `memory.limit_in_bytes`) and picks the tier.
    pub fn detect() -> Result<Tier, TierError> {
        let meminfo = read("/proc/meminfo")?;
        let cgroup = [
            "/sys/fs/cgroup/memory.max",
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
        ]
        .iter()
        .find(|p| Path::new(p).exists())
        .map(|p| read(p))
        .transpose()?;
        Tier::from_texts(&meminfo, cgroup.as_deref())
    }
}

fn read(path: &str) -> Result<String, TierError> {
    std::fs::read_to_string(path).map_err(|source| TierError::Io {
        path: path.to_string(),
        source,
    })
}

/// `MemTotal` in bytes from `/proc/meminfo` text (`MemTotal:  24684084 kB`).
pub fn parse_meminfo(text: &str) -> Result<u64, TierError> {
    let malformed = |message: String| TierError::Malformed {
        source_name: "/proc/meminfo".into(),
        message,
    };
    let line = text
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .ok_or_else(|| malformed("no MemTotal line".into()))?;
    let mut parts = line["MemTotal:".len()..].split_whitespace();
    let value = parts
        .next()
        .ok_or_else(|| malformed(format!("MemTotal has no value: {line:?}")))?;
    let kb: u64 = value
        .parse()
        .map_err(|_| malformed(format!("MemTotal value is not a number: {line:?}")))?;
    match parts.next() {
        Some("kB") | Some("KB") | Some("kb") => {}
        Some(unit) => return Err(malformed(format!("MemTotal unit {unit:?} is not kB"))),
        None => return Err(malformed(format!("MemTotal has no unit: {line:?}"))),
    }
    if kb == 0 {
        return Err(malformed("MemTotal is 0 kB".into()));
    }
    kb.checked_mul(1024)
        .ok_or_else(|| malformed(format!("MemTotal {kb} kB overflows")))
}

/// A cgroup memory limit in bytes: `max` (v2) or a value at or above 2^60 (v1's "unlimited")
/// mean no limit.
pub fn parse_cgroup_limit(text: &str) -> Result<Option<u64>, TierError> {
    let t = text.trim();
    if t == "max" {
        return Ok(None);
    }
    let v: u64 = t.parse().map_err(|_| TierError::Malformed {
        source_name: "cgroup memory limit".into(),
        message: format!("expected a byte count or \"max\", got {t:?}"),
    })?;
    Ok(if v >= 1 << 60 { None } else { Some(v) })
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let src = match self.memory_source {
            MemorySource::MemTotal => "MemTotal",
            MemorySource::CgroupLimit => "cgroup limit",
        };
        writeln!(f, "tier:            {}", self.name)?;
        writeln!(
            f,
            "memory:          {} kB ({src})",
            self.memory_bytes / 1024
        )?;
        writeln!(
            f,
            "object target:   {} bytes (~{} MB)",
            self.object_bytes,
            self.object_bytes / (KB * KB)
        )?;
        writeln!(f, "pipeline depth:  {}", self.pipeline_depth)?;
        writeln!(f, "load budget:     {} bytes", self.load_budget)?;
        write!(f, "max flush delay: {} s", self.max_flush_delay.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meminfo(kb: u64) -> String {
        format!("MemTotal:       {kb} kB\nMemFree:        1000 kB\nMemAvailable:   1000 kB\n")
    }

    fn tier(kb: u64) -> Tier {
        Tier::from_texts(&meminfo(kb), None).unwrap()
    }

    #[test]
    fn thresholds() {
        let t = tier(30_000_000);
        assert_eq!(t.name, TierName::Large);
        assert_eq!(t.object_bytes, 46_000_000);
        assert_eq!(t.pipeline_depth, 56);
        assert_eq!(t.load_budget, 14_000_000_000);
        assert_eq!(t.max_flush_delay, Duration::from_secs(60));

        let t = tier(29_999_999);
        assert_eq!(t.name, TierName::Medium);
        assert_eq!(
            (t.object_bytes, t.pipeline_depth, t.load_budget),
            (24_000_000, 32, 6_500_000_000)
        );
        // This machine's class: 24 GiB.
        assert_eq!(tier(24_684_084).name, TierName::Medium);
        assert_eq!(tier(15_000_000).name, TierName::Medium);

        let t = tier(14_999_999);
        assert_eq!(
            (t.name, t.pipeline_depth, t.load_budget),
            (TierName::Small, 24, 3_500_000_000)
        );
        assert_eq!(tier(7_000_000).name, TierName::Small);

        let t = tier(6_999_999);
        assert_eq!(
            (t.name, t.pipeline_depth, t.load_budget),
            (TierName::Tiny, 16, 1_200_000_000)
        );
        assert_eq!(tier(3_000_000).name, TierName::Tiny);

        let t = tier(2_000_000);
        assert_eq!((t.name, t.pipeline_depth), (TierName::Minimal, 8));
        assert_eq!(t.load_budget, 2_000_000 * 1024 / 2);
        assert_eq!(t.object_bytes, 24_000_000);
    }

    #[test]
    fn cgroup_limit_lower_than_memtotal_wins() {
        let t = Tier::from_texts(&meminfo(64_000_000), Some("4294967296\n")).unwrap();
        assert_eq!(t.memory_source, MemorySource::CgroupLimit);
        assert_eq!(t.memory_bytes, 4_294_967_296);
        assert_eq!(t.name, TierName::Tiny);
        // A limit above MemTotal, "max" and v1's unlimited value change nothing.
        for text in ["128000000000000", "max\n", "9223372036854771712"] {
            let t = Tier::from_texts(&meminfo(64_000_000), Some(text)).unwrap();
            assert_eq!(t.memory_source, MemorySource::MemTotal, "{text}");
            assert_eq!(t.name, TierName::Large);
        }
    }

    #[test]
    fn malformed_meminfo_is_an_error_not_a_panic() {
        for text in [
            "",
            "MemFree: 100 kB\n",
            "MemTotal:\n",
            "MemTotal: lots kB\n",
            "MemTotal: 100\n",
            "MemTotal: 100 MB\n",
            "MemTotal: 0 kB\n",
            "MemTotal: 99999999999999999999 kB\n",
            "MemTotal: 18446744073709551 kB\n",
            "\u{0}\u{1}garbage",
        ] {
            let err = Tier::from_texts(text, None).unwrap_err();
            assert!(
                matches!(err, TierError::Malformed { .. }),
                "{text:?}: {err}"
            );
            assert!(err.to_string().contains("/proc/meminfo"), "{err}");
        }
        let err = Tier::from_texts(&meminfo(1000), Some("unlimited")).unwrap_err();
        assert!(err.to_string().contains("cgroup"), "{err}");
    }

    #[test]
    fn fixture_meminfo_files() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/meminfo");
        let read = |n: &str| std::fs::read_to_string(format!("{dir}/{n}")).unwrap();
        assert_eq!(
            Tier::from_texts(&read("c6a-4xlarge.txt"), None)
                .unwrap()
                .name,
            TierName::Large
        );
        assert_eq!(
            Tier::from_texts(&read("dev-24g.txt"), None).unwrap().name,
            TierName::Medium
        );
    }

    #[test]
    fn detect_reads_this_machine() {
        let t = Tier::detect().unwrap();
        assert!(t.memory_bytes > 0);
        assert!(t.load_budget > 0 && t.load_budget <= 14_000_000_000);
        let shown = t.to_string();
        assert!(shown.contains("pipeline depth"), "{shown}");
    }
}
