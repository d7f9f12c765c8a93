//! Number formats of the V4.1 KV cache and the MXFP8 output, bit-exact on the host.
