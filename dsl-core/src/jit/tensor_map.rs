//! Encoding a [`TensorMapDesc`] for the GPU with the driver's `cuTensorMapEncodeTiled`.

use cudarc::driver::sys::{
    self, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};

use super::JitError;
use super::device::driver_present;
use crate::ir::{ElemTy, TENSOR_MAP_BYTES};
use crate::tensor_map::{MapSwizzle, TensorMapDesc};

/// A tensor map as the driver encoded it: the 128 opaque bytes a `TensorMap<E, R>` kernel
/// parameter receives by value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodedTensorMap {
    elem: ElemTy,
    rank: u8,
    bytes: [u8; TENSOR_MAP_BYTES],
}

impl EncodedTensorMap {
    pub fn elem(&self) -> ElemTy {
        self.elem
    }

    pub fn rank(&self) -> u8 {
        self.rank
    }

    pub fn bytes(&self) -> &[u8; TENSOR_MAP_BYTES] {
        &self.bytes
    }
}

fn data_type(e: ElemTy) -> CUtensorMapDataType {
    use CUtensorMapDataType::*;
    match e {
        // The copy engine moves bytes; fp8 has no type of its own (CUTLASS does the same).
        ElemTy::U8 | ElemTy::E4m3 => CU_TENSOR_MAP_DATA_TYPE_UINT8,
        ElemTy::I32 => CU_TENSOR_MAP_DATA_TYPE_INT32,
        ElemTy::U32 => CU_TENSOR_MAP_DATA_TYPE_UINT32,
        ElemTy::I64 => CU_TENSOR_MAP_DATA_TYPE_INT64,
        ElemTy::F32 => CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        ElemTy::Bf16 => CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    }
}

fn swizzle(s: MapSwizzle) -> CUtensorMapSwizzle {
    use CUtensorMapSwizzle::*;
    match s {
        MapSwizzle::None => CU_TENSOR_MAP_SWIZZLE_NONE,
        MapSwizzle::B32 => CU_TENSOR_MAP_SWIZZLE_32B,
        MapSwizzle::B64 => CU_TENSOR_MAP_SWIZZLE_64B,
        MapSwizzle::B128 => CU_TENSOR_MAP_SWIZZLE_128B,
    }
}

/// Encodes `desc` with the driver. The description was checked when it was made; the
/// driver may still refuse (an address it does not know, a newer rule), which comes back
/// as a [`JitError::Driver`].
pub fn encode(desc: &TensorMapDesc) -> Result<EncodedTensorMap, JitError> {
    if !driver_present() {
        return Err(JitError::NoDriver);
    }
    let rank = desc.rank();
    let element_strides = [1u32; crate::tensor_map::MAX_RANK];
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    // SAFETY: every array holds at least `rank` (strides: `rank - 1`) entries, and `map` is
    // a properly aligned CUtensorMap the driver writes.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            data_type(desc.elem()),
            rank as u32,
            desc.address() as *mut std::ffi::c_void,
            desc.dims().as_ptr(),
            desc.strides().as_ptr(),
            desc.box_dims().as_ptr(),
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle(desc.swizzle()),
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .map_err(|e| JitError::driver("cuTensorMapEncodeTiled", format!("encoding the {desc}"), e))?;
    let mut bytes = [0u8; TENSOR_MAP_BYTES];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(map.opaque) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    Ok(EncodedTensorMap {
        elem: desc.elem(),
        rank: rank as u8,
        bytes,
    })
}
