#include "tests/support/libsvm_export.h"

#include <cinttypes>
#include <cstdio>
#include <memory>

#include "common/error.h"

namespace svm {

using cae::fail_file;

std::string libsvm_weight_options(const ModelFile& f) {
  std::string out;
  for (int32_t label : f.model.classes) {
    const double w = class_weight(f.class_weight, label);
    if (w == 1.0) continue;
    char item[64];
    std::snprintf(item, sizeof item, "%s-w%d %.17g", out.empty() ? "" : " ", label, w);
    out += item;
  }
  return out;
}

void write_libsvm_model(const cae::AtomicOutput& out, const ModelFile& f) {
  const Model& m = f.model;
  std::unique_ptr<FILE, int (*)(FILE*)> fp(fopen(out.temp_path().c_str(), "w"), fclose);
  if (!fp) fail_file(out.final_path(), "cannot create file");
  FILE* o = fp.get();
  // libsvm writes a one-class model as two "classes" without labels or per-class counts.
  const bool one_class = m.kind == SvmKind::one_class;
  const int k = one_class ? 2 : static_cast<int>(m.classes.size());
  const int64_t n_sv = m.n_sv();
  fprintf(o, "svm_type %s\nkernel_type %s\n", one_class ? "one_class" : "c_svc", kernel_name(m.kernel));
  if (m.kernel == KernelType::rbf) fprintf(o, "gamma %.17g\n", m.gamma);
  fprintf(o, "nr_class %d\ntotal_sv %" PRId64 "\nrho", k, n_sv);
  for (double r : m.rho) fprintf(o, " %.17g", r);
  if (!one_class) fprintf(o, "\nlabel");
  for (int c : m.classes) fprintf(o, " %d", c);
  // Where libsvm's svm_save_model puts them: after label, before nr_sv.
  if (f.has_probability()) {
    fprintf(o, "\nprobA");
    for (double a : f.prob_A) fprintf(o, " %.17g", a);
    fprintf(o, "\nprobB");
    for (double b : f.prob_B) fprintf(o, " %.17g", b);
  }
  if (!one_class) {
    fprintf(o, "\nnr_sv");
    for (int c : m.n_support) fprintf(o, " %d", c);
  }
  fprintf(o, "\nSV\n");
  const int D = f.n_features();
  for (int64_t v = 0; v < n_sv; ++v) {
    for (int r = 0; r < k - 1; ++r) fprintf(o, "%.17g ", m.dual_coef[static_cast<size_t>(r * n_sv + v)]);
    // Feature indices of the full scaled input (1-based); dropped features carry their
    // training value, zeros are left out as libsvm's sparse format allows.
    const float* sv = m.support_vectors.data() + v * m.dim;
    int kept_i = 0, dropped_i = 0;
    for (int feat = 0; feat < D; ++feat) {
      const float x = f.feature_mask[feat] ? sv[kept_i++] : f.dropped_values[dropped_i++];
      if (x != 0) fprintf(o, "%d:%.9g ", feat + 1, static_cast<double>(x));
    }
    fputc('\n', o);
  }
  if (ferror(o) || fflush(o) != 0) fail_file(out.final_path(), "write failed");
}

}  // namespace svm
