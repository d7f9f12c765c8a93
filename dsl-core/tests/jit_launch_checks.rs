//! What the JIT layer checks before it calls the driver, and how it behaves with no GPU:
//! argument packing (exact bytes), argument mismatches, grid and cluster checks, and the
//! refusal of a kernel built for another architecture. None of this needs a GPU.

use dsl_core::Target;
use dsl_core::arch::memory::store;
use dsl_core::arch::thread::thread_idx_x;
use dsl_core::ir::{ElemTy, Kernel, tensor_param};
use dsl_core::jit::{
    self, DeviceInfo, JitError, KernelArg, KernelInfo, Launch, LaunchShape, TensorArg,
};
use dsl_core::trace::{
    E4m3, KernelParam, Tensor, Val, cluster_dims, smem_alloc, threads, trace_kernel,
};

/// A kernel with the given parameters and a body that reads none of them.
fn kernel_with(target: Target, declare: impl FnOnce()) -> Kernel {
    trace_kernel("k", target, || {
        threads(128, 1, 1);
        declare();
    })
    .unwrap()
}

fn info(k: &Kernel) -> KernelInfo {
    KernelInfo::from(k)
}

#[test]
fn scalars_pack_little_endian_at_their_natural_alignment() {
    let k = kernel_with(Target::Sm90a, || {
        Val::<u32>::declare("a");
        Val::<i32>::declare("b");
        Val::<u64>::declare("c");
        Val::<i64>::declare("d");
        Val::<f32>::declare("e");
        Val::<u64>::declare("f");
    });
    let buf = info(&k)
        .marshal(&[
            KernelArg::U32(0x0403_0201),
            KernelArg::I32(-2),
            KernelArg::U64(0x1122_3344_5566_7788),
            KernelArg::I64(-1),
            KernelArg::F32(1.5),
            KernelArg::U64(9),
        ])
        .unwrap();
    assert_eq!(buf.offsets(), &[0, 4, 8, 16, 24, 32]);
    #[rustfmt::skip]
    let want: Vec<u8> = [
        &[0x01, 0x02, 0x03, 0x04][..],                        // a: u32
        &[0xfe, 0xff, 0xff, 0xff],                            // b: i32 -2
        &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11],    // c: u64
        &[0xff; 8],                                           // d: i64 -1
        &[0x00, 0x00, 0xc0, 0x3f],                            // e: f32 1.5
        &[0x00; 4],                                           //    padding to 8
        &[9, 0, 0, 0, 0, 0, 0, 0],                            // f: u64
    ]
    .concat();
    assert_eq!(buf.bytes(), want.as_slice());
}

#[test]
fn a_tensor_is_address_then_extents_then_strides() {
    let k = kernel_with(Target::Sm90a, || {
        Val::<u32>::declare("n");
        Tensor::<f32, 2>::declare("x");
        Tensor::<u8, 1>::declare("y");
    });
    let x = TensorArg::new::<f32, 2>(0xdead_beef_0000, [3, 5], [7, 1]);
    let y = TensorArg::contiguous::<u8, 1>(0x1000, [64]);
    let buf = info(&k)
        .marshal(&[KernelArg::U32(2), x.into(), y.into()])
        .unwrap();
    // n at 0, x (40 bytes) at 8, y (24 bytes) at 48.
    assert_eq!(buf.offsets(), &[0, 8, 48]);
    assert_eq!(buf.bytes().len(), 72);
    let word = |at: usize| i64::from_le_bytes(buf.bytes()[at..at + 8].try_into().unwrap());
    let field = |base: usize, off: u32| word(base + off as usize);
    assert_eq!(field(8, tensor_param::PTR), 0xdead_beef_0000);
    assert_eq!(field(8, tensor_param::extent(0)), 3);
    assert_eq!(field(8, tensor_param::extent(1)), 5);
    assert_eq!(field(8, tensor_param::stride(2, 0)), 7);
    assert_eq!(field(8, tensor_param::stride(2, 1)), 1);
    assert_eq!(field(48, tensor_param::PTR), 0x1000);
    assert_eq!(field(48, tensor_param::extent(0)), 64);
    assert_eq!(field(48, tensor_param::stride(1, 0)), 1);
    // And byte for byte, so the field offsets above cannot both drift.
    #[rustfmt::skip]
    let want: Vec<u8> = [
        2i64, 0xdead_beef_0000, 3, 5, 7, 1, 0x1000, 64, 1,
    ]
    .iter()
    .flat_map(|v| v.to_le_bytes())
    .collect();
    assert_eq!(buf.bytes(), want.as_slice());
}

#[test]
fn contiguous_strides_are_row_major() {
    let t = TensorArg::contiguous::<half::bf16, 3>(0, [2, 3, 4]);
    assert_eq!(t.extents(), &[2, 3, 4]);
    assert_eq!(t.strides(), &[12, 4, 1]);
    assert_eq!(t.elem(), ElemTy::Bf16);
}

#[test]
fn wrong_argument_count_lists_the_parameters() {
    let k = kernel_with(Target::Sm90a, || {
        Tensor::<f32, 1>::declare("out");
        Val::<u32>::declare("n");
    });
    let err = info(&k).marshal(&[KernelArg::U32(1)]).err().unwrap();
    assert_eq!(
        err.to_string(),
        "kernel `k` takes 2 argument(s) (out: a rank-1 f32 tensor, n: u32); 1 were given"
    );
}

#[test]
fn wrong_argument_kinds_name_the_parameter() {
    let k = kernel_with(Target::Sm90a, || {
        Tensor::<E4m3, 2>::declare("kv");
        Val::<u32>::declare("n");
    });
    let kv = TensorArg::contiguous::<E4m3, 2>(0, [4, 4]);
    let cases = [
        (
            [KernelArg::from(kv), KernelArg::U64(1)],
            "argument 1 of kernel `k` (`n`) must be u32; got u64",
        ),
        (
            [KernelArg::from(kv), KernelArg::I32(1)],
            "argument 1 of kernel `k` (`n`) must be u32; got i32",
        ),
        (
            [
                TensorArg::contiguous::<E4m3, 1>(0, [16]).into(),
                KernelArg::U32(1),
            ],
            "argument 0 of kernel `k` (`kv`) must be a rank-2 e4m3 tensor; got a rank-1 e4m3 tensor",
        ),
        (
            [
                TensorArg::contiguous::<u8, 2>(0, [4, 4]).into(),
                KernelArg::U32(1),
            ],
            "argument 0 of kernel `k` (`kv`) must be a rank-2 e4m3 tensor; got a rank-2 u8 tensor",
        ),
        (
            [KernelArg::F32(0.0), KernelArg::U32(1)],
            "argument 0 of kernel `k` (`kv`) must be a rank-2 e4m3 tensor; got f32",
        ),
    ];
    for (args, want) in cases {
        let err = info(&k).marshal(&args).err().unwrap();
        assert!(matches!(err, JitError::ArgKind { .. }));
        assert_eq!(err.to_string(), want);
    }
}

#[test]
fn too_many_parameter_bytes_are_refused() {
    let k = kernel_with(Target::Sm90a, || {
        for i in 0..40 {
            Tensor::<f32, 8>::declare(&format!("t{i}"));
        }
    });
    let args: Vec<KernelArg> = (0..40)
        .map(|_| TensorArg::contiguous::<f32, 8>(0, [1; 8]).into())
        .collect();
    let err = info(&k).marshal(&args).err().unwrap();
    assert!(
        matches!(err, JitError::TooManyParams { bytes: 5440, .. }),
        "{err}"
    );
}

fn cluster_kernel(cluster: [u32; 3]) -> Kernel {
    trace_kernel("clustered", Target::Sm90a, || {
        threads(128, 1, 1);
        cluster_dims(cluster[0], cluster[1], cluster[2]);
        let out = Tensor::<u32, 1>::declare("out");
        store(out.base(), thread_idx_x());
    })
    .unwrap()
}

#[test]
fn the_cluster_must_divide_the_grid() {
    let k = info(&cluster_kernel([2, 1, 1]));
    let err = k.launch_shape(Launch::new([3, 4, 1])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel `clustered` cannot be launched on grid [3, 4, 1]: the kernel's cluster \
         [2, 1, 1] does not divide it; each grid dimension must be a multiple of the \
         cluster's (round the grid up to [4, 4, 1])"
    );
    assert_eq!(
        k.launch_shape(Launch::new([6, 4, 1]).with_pdl()).unwrap(),
        LaunchShape {
            grid: [6, 4, 1],
            block: [128, 1, 1],
            cluster: Some([2, 1, 1]),
            smem_bytes: 0,
            pdl: true,
        }
    );
    let k = info(&cluster_kernel([1, 2, 2]));
    assert!(k.launch_shape(Launch::new([5, 4, 3])).is_err());
    assert!(k.launch_shape(Launch::new([5, 4, 2])).is_ok());
}

#[test]
fn empty_and_oversized_grids_are_refused() {
    let k = info(&cluster_kernel([1, 1, 1]));
    let msg = k
        .launch_shape(Launch::new([0, 1, 1]))
        .unwrap_err()
        .to_string();
    assert!(
        msg.ends_with("every grid dimension must be at least 1"),
        "{msg}"
    );
    let msg = k
        .launch_shape(Launch::new([1, 65536, 1]))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("65535 in each of y and z"), "{msg}");
    assert!(k.launch_shape(Launch::new([1 << 20, 1, 1])).is_ok());
}

fn h200() -> DeviceInfo {
    DeviceInfo {
        ordinal: 0,
        name: "NVIDIA H200".into(),
        compute_capability: (9, 0),
        sm_count: 132,
        max_dynamic_smem_per_block: 227 * 1024,
        driver_version: (13, 0),
    }
}

#[test]
fn a_kernel_for_another_architecture_is_refused_by_name() {
    let k = info(&kernel_with(Target::Sm100a, || {}));
    let err = h200().check_kernel(&k).unwrap_err();
    assert_eq!(
        err.to_string(),
        "this kernel (`k`) was built for sm_100a (Blackwell, compute capability 10.0); the \
         device is NVIDIA H200 (compute capability 9.0): build it for sm_90a"
    );
    let b200 = DeviceInfo {
        name: "NVIDIA B200".into(),
        compute_capability: (10, 0),
        ..h200()
    };
    let err = b200
        .check_kernel(&info(&kernel_with(Target::Sm90a, || {})))
        .unwrap_err();
    assert!(err.to_string().ends_with(": build it for sm_100a"), "{err}");
    let l4 = DeviceInfo {
        name: "NVIDIA L4".into(),
        compute_capability: (8, 9),
        ..h200()
    };
    let err = l4.check_target("k", Target::Sm90a).unwrap_err();
    assert!(
        err.to_string()
            .contains("kestrel has no target for compute capability 8.9"),
        "{err}"
    );
    assert!(
        h200()
            .check_kernel(&info(&kernel_with(Target::Sm90a, || {})))
            .is_ok()
    );
}

#[test]
fn a_driver_older_than_the_ptx_is_refused() {
    let mut k = info(&kernel_with(Target::Sm100a, || {}));
    k.ptx_version = (8, 7);
    let b200_old_driver = DeviceInfo {
        name: "NVIDIA B200".into(),
        compute_capability: (10, 0),
        driver_version: (12, 4),
        ..h200()
    };
    assert_eq!(
        b200_old_driver.check_kernel(&k).unwrap_err().to_string(),
        "kernel `k` is PTX ISA 8.7, which a CUDA 12.8 driver or newer loads; this driver is \
         CUDA 12.4: update the NVIDIA driver"
    );
    assert_eq!(jit::min_driver_for_ptx((8, 0)), Some((12, 0)));
    assert_eq!(jit::min_driver_for_ptx((8, 6)), Some((12, 8)));
    assert_eq!(jit::min_driver_for_ptx((9, 0)), Some((13, 0)));
    assert_eq!(jit::min_driver_for_ptx((9, 9)), None);
}

#[test]
fn shared_memory_beyond_the_device_is_refused() {
    let k = info(
        &trace_kernel("big", Target::Sm90a, || {
            threads(128, 1, 1);
            smem_alloc("tiles", 240 * 1024, 1024);
        })
        .unwrap(),
    );
    let msg = h200().check_kernel(&k).unwrap_err().to_string();
    assert!(
        msg.starts_with(
            "kernel `big` needs 245760 bytes of dynamic shared memory per CTA; NVIDIA H200 \
             allows at most 232448"
        ),
        "{msg}"
    );
}

#[test]
fn without_a_driver_nothing_panics_and_device_tests_skip() {
    if jit::driver_present() {
        // On a GPU machine the GPU tests themselves cover this path.
        return;
    }
    assert!(!jit::gpu_available());
    assert!(matches!(jit::device_count(), Err(JitError::NoDriver)));
    let err = jit::Device::open(0).err().unwrap();
    assert!(
        err.to_string()
            .starts_with("no CUDA driver on this machine"),
        "{err}"
    );
    assert!(jit::test_device(Target::Sm90a).is_none());
}
