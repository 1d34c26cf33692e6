//! The code's promises about itself, one test binary: the architecture its map draws
//! (`architecture.rs`), no import circle (`module_graph.rs`), where the dependencies come
//! from and their licences (`dependencies.rs`). They read the source, the manifests and
//! `cargo metadata`; none runs a program of the project.

mod architecture;
mod dependencies;
mod module_graph;
