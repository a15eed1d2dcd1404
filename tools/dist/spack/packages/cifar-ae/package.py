# Spack recipe for cifar-ae (docs/INSTALL.md):
#   spack repo add tools/dist/spack
#   spack install cifar-ae                        # CPU only
#   spack install cifar-ae +cuda cuda_arch=90     # with the CUDA kernels, for sm_90
from spack.package import *


class CifarAe(MakefilePackage, CudaPackage):
    """Images -> convolutional autoencoder features -> RBF SVM: seven command-line tools
    exchanging HDF5 files, each running on CPU or GPU (--device cpu|gpu|auto)."""

    # The repository's address is the site's: give it in packages.yaml
    # (packages: cifar-ae: package_attributes: git: URL) or build a checkout with
    # `spack develop` (docs/INSTALL.md).
    version("main", branch="main")

    # CudaPackage adds the "cuda" variant (off by default) and "cuda_arch".
    conflicts("cuda_arch=none", when="+cuda", msg="give the GPU generation, e.g. cuda_arch=90")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("gmake", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("help2man", type="build")
    depends_on("cli11", type="build")

    depends_on("hdf5~mpi")
    depends_on("openblas threads=pthreads")
    depends_on("libsvm")
    depends_on("libarchive")
    depends_on("libdeflate")
    depends_on("libpng")
    depends_on("libjpeg-turbo")
    depends_on("openssl")
    depends_on("cuda@12:", when="+cuda")

    # The report tool is a Python zip application.
    depends_on("python@3.9:", type=("build", "run"))
    depends_on("py-numpy", type="run")
    depends_on("py-h5py", type="run")
    depends_on("py-matplotlib", type="run")

    depends_on("googletest", type="test")
    depends_on("bats", type="test")

    # libgomp is linked statically (Makefile, "OpenMP"): GCC's runtime.
    requires("%gcc", msg="the tools link GCC's libgomp statically")

    def _make_args(self, spec):
        args = [
            "PREFIX={0}".format(self.prefix),
            "PYTHON={0}".format(spec["python"].command.path),
            # Spack provides the dependencies: no apt-get.
            "INSTALL_DEPS=0",
            # Spack's compiler wrapper adds the target's -march.
            "CPU_ARCH=",
            "HDF5_CFLAGS=-I{0}".format(spec["hdf5"].prefix.include),
            "HDF5_LIBS={0}".format(spec["hdf5"].libs.ld_flags),
        ]
        if spec.satisfies("+cuda"):
            archs = spec.variants["cuda_arch"].value
            gencode = " ".join(self.cuda_flags(archs))
            args += [
                "CUDA_HOME={0}".format(spec["cuda"].prefix),
                "NVCC={0}".format(spec["cuda"].prefix.bin.nvcc),
                "CUDA_ARCH={0}".format(gencode),
            ]
        else:
            args.append("GPU=0")
        return args

    @property
    def build_targets(self):
        return ["all"] + self._make_args(self.spec)

    @property
    def install_targets(self):
        return ["install"] + self._make_args(self.spec)

    def check(self):
        make("test-unit", *self._make_args(self.spec))

    def setup_run_environment(self, env):
        env.prepend_path("MANPATH", self.prefix.share.man)
        env.prepend_path("XDG_DATA_DIRS", self.prefix.share)
