#include "kernels/svm/classify_request.h"

#include <algorithm>
#include <cstdio>

#include "common/cublas_runtime.h"
#include "common/error.h"
#include "common/json.h"
#include "common/log.h"

namespace svm {

void run_classify(const ClassifyRequest& req) {
  // The CUDA driver is asked, and GPU 0's context and cuBLAS made, while the model is read.
  const cae::DeviceChoice choice(req.common.device);
  cae::cublas::preload(choice, 0);
  const Classifier clf = Classifier::load(req.svm);
  require_classifier(clf, req.svm);
  const cae::Device device = choice.get();
  const cae::ViewSet tta = cae::ViewSet::parse(req.tta);  // (checked by its option)
  const int views = tta.count();
  ClassifyRows q = req.make_rows(clf, device, tta);
  const int64_t n = q.n;
  Rejection rejection;
  if (!req.reject.empty()) {
    const Classifier one_class = load_one_class(req.reject);
    check_reject_model(one_class, req.reject, clf, req.svm, q.origin, req.allow_mismatch);
    rejection = reject_outside(one_class, req.reject, q.X.data(), n, views, device);
  }
  // As svm-eval --tta: each row's decision values are the mean of its views'.
  const std::vector<double> dec =
      average_views(clf.decision_values(q.X.data(), views * n, device), n, clf.model().n_pairs(), views);
  const std::vector<int32_t> pred = clf.vote(dec, n);

  const bool by_prob = clf.has_probability();
  const std::vector<std::vector<ClassScore>> ranks = ranked_classes(clf, dec, n);
  for (int64_t i = 0; i < n; ++i) {
    RowVerdict v{req.images.empty() ? "" : req.images[size_t(i)], i, pred[i], ranks[i], -1};
    v.ranked.resize(std::min(v.ranked.size(), size_t(req.top)));
    if (!req.reject.empty()) v.inside = rejection.inside[i];
    if (req.common.json) cae::emit_json(req.common, verdict_json(v, clf.file().class_names, by_prob));
    else printf("%s\n", verdict_text(v, clf.file().class_names, by_prob).c_str());
  }
  fflush(stdout);
  const std::string outside =
      req.reject.empty() ? "" : cae::strprintf("; %lld outside %s", static_cast<long long>(rejection.outside),
                                               req.reject.c_str());
  cae::log_info("classified %s; %s%s%s)", q.described.c_str(), by_prob ? "probabilities" : "one-vs-one votes",
                q.device.c_str(), outside.c_str());
}

}  // namespace svm
