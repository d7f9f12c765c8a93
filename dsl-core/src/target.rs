//! Compilation targets: the SM architecture a kernel is traced and emitted for, as a set of
//! [`Capability`]s and a minimum PTX ISA version.
//!
//! Ops never name a target: each asks for capabilities (`ir::Requirement`), and a target is
//! what it has. Adding a target (say `sm_103a`, Blackwell Ultra: sm_100a's capabilities from
//! PTX 8.8) is a variant here with its names, compute capability, PTX minimum, family and
//! capability set, plus the `Target::ALL` entry and `FromStr` spellings; no op family
//! changes. Kernels that choose an algorithm per target (`kernels/`) then decide what the new
//! one runs, preferably by asking [`Target::has`].

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

/// A hardware feature that some ops need and some targets have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `wgmma.*`: warpgroup MMA with register accumulators (sm_90a).
    Wgmma,
    /// `tcgen05.mma`, `tcgen05.commit`, the tcgen05 fences (sm_100a).
    Tcgen05,
    /// Tensor memory: `tcgen05.alloc/dealloc/ld/wait::ld` (sm_100a).
    Tmem,
    /// TMA tensor copies and `prefetch.tensormap` (sm_90+).
    Tma,
    /// 1-D `cp.async.bulk` copies and bulk groups (sm_90+).
    BulkCopy,
    /// Per-thread `cp.async` (sm_80+).
    CpAsync,
    /// Thread-block clusters: cluster barriers, `mapa`, shared::cluster accesses, cluster
    /// fences and special registers, multicast (sm_90+).
    Cluster,
    /// mbarrier transaction counts: `expect_tx`, `complete_tx` (sm_90+).
    MbarrierTx,
    /// `setmaxnreg` (sm_90a, sm_100a).
    Setmaxnreg,
    /// `elect.sync` (sm_90+).
    ElectSync,
    /// `fence.proxy.async` between the generic and the async proxy (sm_90+).
    AsyncProxy,
    /// `griddepcontrol`: programmatic dependent launch (sm_90+).
    GridDepControl,
    /// `cvt.rn.f16x2.e2m1x2` (sm_100a).
    NativeE2m1Cvt,
    /// `cvt` to and from `ue8m0x2` (sm_100a).
    Ue8m0Cvt,
    /// Warp-wide 8x8 matrix loads and stores of shared memory: `ldmatrix` (sm_75+) and
    /// `stmatrix` (sm_90+).
    MatrixLdSt,
}

impl Capability {
    pub const ALL: [Capability; 15] = [
        Capability::Wgmma,
        Capability::Tcgen05,
        Capability::Tmem,
        Capability::Tma,
        Capability::BulkCopy,
        Capability::CpAsync,
        Capability::Cluster,
        Capability::MbarrierTx,
        Capability::Setmaxnreg,
        Capability::ElectSync,
        Capability::AsyncProxy,
        Capability::GridDepControl,
        Capability::NativeE2m1Cvt,
        Capability::Ue8m0Cvt,
        Capability::MatrixLdSt,
    ];

    /// The name messages use (`tcgen05`, `tensor memory`).
    pub fn name(self) -> &'static str {
        match self {
            Capability::Wgmma => "wgmma",
            Capability::Tcgen05 => "tcgen05",
            Capability::Tmem => "tensor memory",
            Capability::Tma => "TMA tensor copies",
            Capability::BulkCopy => "bulk copies",
            Capability::CpAsync => "cp.async",
            Capability::Cluster => "thread-block clusters",
            Capability::MbarrierTx => "mbarrier transaction counts",
            Capability::Setmaxnreg => "setmaxnreg",
            Capability::ElectSync => "elect.sync",
            Capability::AsyncProxy => "the async proxy fence",
            Capability::GridDepControl => "programmatic dependent launch",
            Capability::NativeE2m1Cvt => "native e2m1 conversion",
            Capability::Ue8m0Cvt => "native ue8m0 conversion",
            Capability::MatrixLdSt => "ldmatrix/stmatrix",
        }
    }

    const fn bit(self) -> u32 {
        1 << self as u32
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of [`Capability`]s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Capabilities(u32);

impl Capabilities {
    pub const NONE: Capabilities = Capabilities(0);

    pub const fn of(caps: &[Capability]) -> Capabilities {
        let mut bits = 0;
        let mut i = 0;
        while i < caps.len() {
            bits |= caps[i].bit();
            i += 1;
        }
        Capabilities(bits)
    }

    pub const fn with(self, cap: Capability) -> Capabilities {
        Capabilities(self.0 | cap.bit())
    }

    pub const fn without(self, cap: Capability) -> Capabilities {
        Capabilities(self.0 & !cap.bit())
    }

    pub const fn contains(self, cap: Capability) -> bool {
        self.0 & cap.bit() != 0
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// What `self` has that `have` lacks.
    pub const fn minus(self, have: Capabilities) -> Capabilities {
        Capabilities(self.0 & !have.0)
    }

    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL
            .into_iter()
            .filter(move |&c| self.contains(c))
    }
}

impl fmt::Display for Capabilities {
    /// `tcgen05, tensor memory`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.iter().map(Capability::name).collect();
        f.write_str(&names.join(", "))
    }
}

/// What sm_90 and sm_100 share.
const SM90_SM100: Capabilities = Capabilities::of(&[
    Capability::Tma,
    Capability::BulkCopy,
    Capability::CpAsync,
    Capability::Cluster,
    Capability::MbarrierTx,
    Capability::Setmaxnreg,
    Capability::ElectSync,
    Capability::AsyncProxy,
    Capability::GridDepControl,
    Capability::MatrixLdSt,
]);

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

    /// What the target has.
    pub const fn capabilities(self) -> Capabilities {
        match self {
            Target::Sm90a => SM90_SM100.with(Capability::Wgmma),
            Target::Sm100a => SM90_SM100
                .with(Capability::Tcgen05)
                .with(Capability::Tmem)
                .with(Capability::NativeE2m1Cvt)
                .with(Capability::Ue8m0Cvt),
        }
    }

    pub const fn has(self, cap: Capability) -> bool {
        self.capabilities().contains(cap)
    }

    /// The most dynamic shared memory one CTA may have (227 KiB on sm_90 and sm_100).
    pub const fn max_smem_bytes(self) -> u32 {
        match self {
            Target::Sm90a | Target::Sm100a => 227 * 1024,
        }
    }

    /// The architecture family, for messages (`Hopper`).
    pub fn family(self) -> &'static str {
        match self {
            Target::Sm90a => "Hopper",
            Target::Sm100a => "Blackwell",
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
