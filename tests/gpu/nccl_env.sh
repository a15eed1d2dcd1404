# Sourced by the GPU test and benchmark scripts: makes NCCL loadable and keeps NVLink
# multicast off (NCCL_NVLS_ENABLE=0: the lent multi-GPU hosts need it; a value already set
# wins). NCCL is taken from LD_LIBRARY_PATH, the CUDA toolkit's lib64, or the GPU host's
# Python environment (pip's nvidia-nccl-cu12 puts libnccl.so.2 in nvidia/nccl/lib).
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2'; then
  for _nccl_dir in ${CUDA_HOME:-/usr/local/cuda}/lib64 \
                   "$(${BENCH_PYTHON:-python3} -c 'import nvidia.nccl as n; print(list(n.__path__)[0] + "/lib")' 2>/dev/null)"; do
    if [ -n "$_nccl_dir" ] && [ -e "$_nccl_dir/libnccl.so.2" ]; then
      case ":${LD_LIBRARY_PATH:-}:" in
        *":$_nccl_dir:"*) ;;
        *) export LD_LIBRARY_PATH="$_nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
      esac
      break
    fi
  done
  unset _nccl_dir
fi
