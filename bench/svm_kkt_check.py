"""KKT gap of chosen class pairs of an svm-fit model, recomputed with FP32 or float64 sums.

The solver's rows are the scaled, masked training rows rounded to float16 (docs/SVM_GPU.md,
"Kernel values in working sets"); this takes the same rows and computes every kernel value
from dot products summed as --dots says (norms and distances in float64; under fp32 the value
rounded to float32 as the solver's cache keeps it, under fp64 kept in float64 as the solver's
float64 gradient takes it, docs/SVM_GPU.md "Kernel values in working sets"), and each
row's gradient G_t = y_t f_t - 1 (f_t = sum_s y_s a_s K(x_t, x_s), in float64), then
libsvm's gap m(a) - M(a) over all the pair's rows.
usage: /usr/bin/python3 bench/svm_kkt_check.py [--dots fp32|fp64] MODEL FEATURES VIEWS a,b [a,b ...]
(VIEWS: the fit's --augment, or none; a,b: class labels of a pair). --dots: how the dot
products of the rounded rows are summed: fp32 (the default: cuBLAS SGEMM, TF32 off) or fp64
(float64 GEMM: the products of float16 values summed with no loss that matters, the exact
problem's gap). On the GPU host (torch with CUDA); falls back to the CPU for small problems.
"""
import sys, time
import h5py, numpy as np, torch

torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda" if torch.cuda.is_available() else "cpu"
args = sys.argv[1:]
dots_mode = "fp32"
if args[:1] == ["--dots"]:
    dots_mode, args = args[1], args[2:]
    assert dots_mode in ("fp32", "fp64"), dots_mode
model, feats, views, pairs = args[0], args[1], args[2], args[3:]


def pair_dots(xr, sv):
    """xr . sv^T in float64, summed as --dots says."""
    if dots_mode == "fp64":
        return xr.double() @ sv.double().T
    return (xr @ sv.T).double()
m = h5py.File(model, "r")
mean = torch.tensor(m["/scaler/mean"][:], device=dev)
scale = torch.tensor(m["/scaler/scale"][:], device=dev)
mask = torch.tensor(m["/svm/feature_mask"][:].astype(bool), device=dev)
gamma = float(m.attrs["gamma"]); C = float(m.attrs["C"]); tol = float(m.attrs.get("tol", 1e-3))
classes = list(m["/svm/classes"][:]); nsup = m["/svm/n_support"][:]
coef = m["/svm/dual_coef"][:]; sv_idx = m["/svm/support_indices"][:]
half = m["/svm/support_vectors"].dtype == np.float16  # the solver's rows were rounded so
start = np.concatenate([[0], np.cumsum(nsup)])
f = h5py.File(feats, "r")
flip = "flip" in views
K = int(views.split("shift:")[1]) if "shift:" in views else 0
names = []
for k in range(K + 1):
    base = "features" if k == 0 else f"features_shift{k}"
    names.append(base)
    if flip: names.append(base + "_flip")
labels = f["/train/labels"][:]
N = len(labels)
t0 = time.time()
def rows_of(idx_rows):
    """Scaled, masked, float16-rounded rows (as float32) of the given fitted-row indices."""
    out = []
    idx_rows = np.asarray(idx_rows)
    for j, name in enumerate(names):
        sel = idx_rows[(idx_rows // N) == j] % N
        if len(sel) == 0: continue
        x = torch.tensor(f["/train/" + name][np.sort(sel)].astype(np.float32), device=dev).double()
        x = ((x - mean).float().double() / scale).float()
        x = x[:, mask]
        out.append((np.sort(sel) + j * N, x.half().float() if half else x))
    order = np.concatenate([o[0] for o in out]); X = torch.cat([o[1] for o in out])
    return order, X
print(f"dots {dots_mode}; model: {len(sv_idx)} SVs, C {C}, gamma {gamma:.6g}, tol {tol}; views {views} ({len(names)}), N {N}")
for spec in pairs:
    a, b = (int(v) for v in spec.split(","))
    ia, ib = classes.index(a), classes.index(b)
    # the pair's support vectors and their coefficients y_s a_s
    sv_a = np.arange(start[ia], start[ia + 1]); sv_b = np.arange(start[ib], start[ib + 1])
    c_a = coef[ib - 1, sv_a]; c_b = coef[ia, sv_b]
    sv = np.concatenate([sv_a, sv_b]); c = np.concatenate([c_a, c_b])
    keep = c != 0
    sv, c = sv[keep], c[keep]
    SVX = torch.tensor(m["/svm/support_vectors"][np.sort(sv)].astype(np.float32), device=dev)
    c_sorted = torch.tensor(c[np.argsort(sv)], device=dev)
    sv_n = (SVX.double() ** 2).sum(1)
    # every fitted row of the two classes
    lab_rows = np.nonzero((labels == a) | (labels == b))[0]
    all_rows = np.concatenate([lab_rows + j * N for j in range(len(names))])
    order, X = rows_of(all_rows)
    y = torch.tensor(np.where(labels[order % N] == a, 1.0, -1.0), device=dev)
    alpha = torch.zeros(len(order), dtype=torch.float64, device=dev)
    pos = {r: i for i, r in enumerate(order)}
    sv_rows = sv_idx[np.sort(sv)]
    ii = torch.tensor([pos[r] for r in sv_rows], device=dev)
    alpha[ii] = c_sorted.abs()
    x_n = (X.double() ** 2).sum(1)
    fval = torch.zeros(len(order), dtype=torch.float64, device=dev)
    B = 16384
    for r0 in range(0, len(order), B):
        xr = X[r0:r0 + B]
        for s0 in range(0, SVX.shape[0], 32768):
            dots = pair_dots(xr, SVX[s0:s0 + 32768])
            d2 = (x_n[r0:r0 + B, None] + sv_n[None, s0:s0 + 32768] - 2 * dots).clamp_min(0)
            kv = torch.exp(-gamma * d2)
            if dots_mode == "fp32": kv = kv.float().double()
            fval[r0:r0 + B] += kv @ c_sorted[s0:s0 + 32768]
    G = y * fval - 1
    up = ((y > 0) & (alpha < C)) | ((y < 0) & (alpha > 0))
    low = ((y < 0) & (alpha < C)) | ((y > 0) & (alpha > 0))
    mx = (-y * G)[up].max().item(); mn = (-y * G)[low].min().item()
    print(f"pair ({a},{b}): {len(order)} rows, {len(sv)} SVs, bounded {(alpha >= C).sum().item()}; "
          f"KKT gap {mx - mn:.3e} (tol {tol}); {time.time() - t0:.0f} s")
