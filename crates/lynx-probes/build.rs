fn main() {
    lynx_build::link_libtorch();
}
