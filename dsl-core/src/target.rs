//! Compilation targets: the SM architecture a kernel is traced and emitted for.

use std::fmt;
use std::str::FromStr;

/// An architecture-specific PTX target. The IR names no SM; ops ask the target whether
/// they exist on it, and the emitter takes the `.target` and minimum `.version` from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// Hopper (H100, H200): wgmma, clusters, TMA. `.target sm_90a`.
    Sm90a,
    /// Blackwell datacenter (B200, GB200): tcgen05 MMA and tensor memory. `.target sm_100a`.
    Sm100a,
}

impl Target {
    pub const ALL: [Target; 2] = [Target::Sm90a, Target::Sm100a];

    /// The name PTX and ptxas use (`sm_90a`).
    pub fn sm_name(self) -> &'static str {
        match self {
            Target::Sm90a => "sm_90a",
            Target::Sm100a => "sm_100a",
        }
    }

    /// Short name used in snapshot and cache names (`sm90a`).
    pub fn short_name(self) -> &'static str {
        match self {
            Target::Sm90a => "sm90a",
            Target::Sm100a => "sm100a",
        }
    }

    /// The lowest PTX ISA version (major, minor) that knows this target.
    pub fn min_ptx_version(self) -> (u32, u32) {
        match self {
            Target::Sm90a => (8, 0),
            Target::Sm100a => (8, 6),
        }
    }

    /// The target for a device of compute capability `major.minor`, if the project has one.
    pub fn for_compute_capability(major: i32, minor: i32) -> Option<Target> {
        match (major, minor) {
            (9, 0) => Some(Target::Sm90a),
            (10, 0) => Some(Target::Sm100a),
            _ => None,
        }
    }

    /// The compute capability a device needs to run code built for this target.
    pub fn compute_capability(self) -> (i32, i32) {
        match self {
            Target::Sm90a => (9, 0),
            Target::Sm100a => (10, 0),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.sm_name())
    }
}

impl FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sm_90a" | "sm90a" => Ok(Target::Sm90a),
            "sm_100a" | "sm100a" => Ok(Target::Sm100a),
            other => Err(format!(
                "unknown target `{other}`: expected sm_90a (Hopper) or sm_100a (Blackwell)"
            )),
        }
    }
}
