"""C++/OpenMP build layer: toolchain, build + cache, loader, runtime header."""
