"""Device-side helpers shared by kernels. Import only inside a kernel module's ``build()``,
after ``gcmoe_build.frontend.dsl.import_dsl(arch)`` (these modules import the CuTe DSL)."""
