fn main() {
    lynx_build::link_libtorch();
    lynx_build::harness_metadata();
}
