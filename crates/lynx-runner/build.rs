fn main() {
    lynx_build::link_libtorch();
    lynx_build::harness_metadata();
    lynx_build::compile_libtorch_shim("csrc/inference_mode.cpp", "lynx_inference_mode");
    lynx_build::build_cuda_shim("csrc/cuda.cpp", "lynx_cuda");
    lynx_build::embed_catalogue("../../models");
}
