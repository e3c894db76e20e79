fn main() {
    lynx_build::link_libtorch();
    lynx_build::compile_libtorch_shim("csrc/onednn.cpp", "lynx_onednn");
}
