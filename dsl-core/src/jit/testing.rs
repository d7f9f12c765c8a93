//! The guard every GPU test starts with.

use std::io::Write;
use std::panic::Location;

use super::device::{Device, device_count, driver_present};
use crate::Target;

/// Set (to anything but `0`) where a GPU must be present: a missing driver or device then
/// fails the test instead of skipping it, so a broken GPU machine cannot pass by skipping.
pub const REQUIRE_GPU_ENV: &str = "KESTREL_REQUIRE_GPU";

/// Opens device 0 for a GPU test that needs `needs`, or says why the test is skipped.
///
/// On a machine without a CUDA driver or device, or with a device of another
/// architecture, this prints one line to stderr, `SKIPPED gpu test <name>: <reason>`, and
/// returns `None`; the test then returns and passes. The line goes straight to the stderr
/// stream rather than through `eprintln!`, which the test harness would hide. With
/// [`REQUIRE_GPU_ENV`] set, a missing driver or device panics instead. A device that is
/// present but fails to open always panics: that is a broken machine, not a skip.
///
/// GPU tests are named `gpu_*`, so that a filter selects them (the bundle's runner uses
/// that to put only them under compute-sanitizer).
///
/// ```no_run
/// # use dsl_core::{Target, jit};
/// #[test]
/// fn gpu_scale() {
///     let Some(dev) = jit::test_device(Target::Sm90a) else { return };
///     // ... load and launch on `dev` ...
/// }
/// ```
#[track_caller]
pub fn test_device(needs: Target) -> Option<Device> {
    let name = test_name(Location::caller());
    let require = std::env::var(REQUIRE_GPU_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
    let missing = if !driver_present() {
        Some("no CUDA driver/GPU on this machine".to_string())
    } else {
        match device_count() {
            Ok(0) => Some("the CUDA driver sees no GPU on this machine".to_string()),
            Ok(_) => None,
            Err(e) => panic!("gpu test {name}: {e}"),
        }
    };
    if let Some(reason) = missing {
        if require {
            panic!("gpu test {name}: {REQUIRE_GPU_ENV} is set but there is {reason}");
        }
        skip(&name, &reason);
        return None;
    }
    let dev = Device::open(0).unwrap_or_else(|e| panic!("gpu test {name}: {e}"));
    if let Some(reason) = target_mismatch(dev.info().compute_capability, &dev.info().name, needs) {
        skip(&name, &reason);
        return None;
    }
    Some(dev)
}

/// Why a device of compute capability `cc` cannot run a test built for `needs`.
fn target_mismatch(cc: (i32, i32), device: &str, needs: Target) -> Option<String> {
    (needs.compute_capability() != cc).then(|| {
        format!(
            "device is sm_{}{} ({device}), test needs {needs}",
            cc.0, cc.1
        )
    })
}

/// The running test's name: libtest runs each test on a thread named after it.
fn test_name(caller: &Location<'_>) -> String {
    match std::thread::current().name() {
        Some(n) if n != "main" => n.to_string(),
        _ => caller.to_string(),
    }
}

fn skip(name: &str, reason: &str) {
    // One write, so that the line stays whole among the harness's own output.
    let line = format!("SKIPPED gpu test {name}: {reason}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_device_and_the_needed_target() {
        assert_eq!(
            target_mismatch((9, 0), "NVIDIA H200", Target::Sm100a).as_deref(),
            Some("device is sm_90 (NVIDIA H200), test needs sm_100a")
        );
        assert_eq!(target_mismatch((9, 0), "NVIDIA H200", Target::Sm90a), None);
        assert_eq!(
            target_mismatch((8, 9), "NVIDIA L4", Target::Sm90a).as_deref(),
            Some("device is sm_89 (NVIDIA L4), test needs sm_90a")
        );
    }

    #[test]
    fn test_name_is_the_harness_thread_name() {
        assert_eq!(
            test_name(Location::caller()),
            "jit::testing::tests::test_name_is_the_harness_thread_name"
        );
    }
}
