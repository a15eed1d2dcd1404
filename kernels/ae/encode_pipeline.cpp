#include "kernels/ae/encode_pipeline.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>

#include "common/phases.h"
#include "common/timer.h"

namespace ae {

// Runs queued tasks one at a time, in the order queued. Each task gets a ticket (1, 2, ...);
// wait(t) returns once tasks 1..t have run. After a task throws, the rest are dropped and
// every wait rethrows its exception.
class EncodePipeline::IoThread {
 public:
  IoThread() : thread_([this] { loop(); }) {}
  ~IoThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      queue_.clear();
    }
    changed_.notify_all();
    thread_.join();
  }

  uint64_t push(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
    changed_.notify_all();
    return ++queued_;
  }

  // Drops the queued tasks and waits for the running one: nothing the caller owns is used
  // after this returns.
  void drop() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_ += queue_.size();
    queue_.clear();
    changed_.wait(lock, [&] { return done_ == queued_; });
  }

  void wait(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return done_ >= ticket || error_; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      if (!error_) {
        lock.unlock();
        std::exception_ptr failure;
        try {
          task();
        } catch (...) {
          failure = std::current_exception();
        }
        lock.lock();
        if (failure) error_ = failure;
      }
      ++done_;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  uint64_t queued_ = 0, done_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

EncodePipeline::EncodePipeline(const cae::DatasetReader& data, Encoder& encoder, std::vector<cae::ImageView> views,
                               int64_t chunk, int64_t read_ahead_bytes)
    : data_(data), encoder_(encoder), views_(std::move(views)), chunk_(chunk), io_(std::make_unique<IoThread>()) {
  const Architecture& a = encoder_.architecture();
  const int64_t chunk_bytes = chunk_ * a.image_dim();
  pixel_slots_ = std::max<int64_t>(2, read_ahead_bytes / chunk_bytes);
  // Pages are touched only by the reads that use them: a split shorter than the read-ahead
  // costs only its own pixels.
  pixels_.resize(static_cast<size_t>(pixel_slots_ * chunk_bytes));
  features_.resize(static_cast<size_t>(2 * chunk_ * a.latent_dim()));
}

EncodePipeline::~EncodePipeline() = default;

// S slots of pixels and two of features make the overlap: the first S chunks' reads are
// queued at once, chunk k+S is read into chunk k's pixel slot once all of chunk k's views
// are encoded, and the (chunk, view) pair u+2 is encoded into pair u's feature slot once
// pair u's features are written. Reads are queued before writes, so the encoder waits on the
// disk as little as it can.
void EncodePipeline::run(const std::string& split, int64_t first, int64_t count, const Sink& sink,
                         const std::function<void(int64_t)>& progress) {
  try {
    run_chunks<float>(split, first, count, sink, progress);
  } catch (...) {
    io_->drop();  // its queued tasks hold `sink` and the buffers
    throw;
  }
}

void EncodePipeline::run(const std::string& split, int64_t first, int64_t count, const HalfSink& sink,
                         const std::function<void(int64_t)>& progress) {
  try {
    run_chunks<cae::Half>(split, first, count, sink, progress);
  } catch (...) {
    io_->drop();
    throw;
  }
}

template <typename Code, typename SinkOf>
void EncodePipeline::run_chunks(const std::string& split, int64_t first, int64_t count, const SinkOf& sink,
                                const std::function<void(int64_t)>& progress) {
  static_assert(sizeof(Code) <= sizeof(float), "a slot holds chunk × latent_dim floats");
  const int64_t chunks = (count + chunk_ - 1) / chunk_;
  const int nviews = static_cast<int>(views_.size());
  auto rows_of = [&](int64_t k) { return std::min(chunk_, count - k * chunk_); };
  const int64_t slots = std::min(pixel_slots_, chunks);
  const int64_t chunk_bytes = chunk_ * encoder_.architecture().image_dim();
  auto pixels_of = [&](int64_t k) { return pixels_.data() + (k % slots) * chunk_bytes; };
  auto queue_read = [&](int64_t k) {
    uint8_t* out = pixels_of(k);
    const int64_t row = first + k * chunk_, rows = rows_of(k);
    return io_->push([this, split, row, rows, out] {
      cae::Stopwatch clock;
      data_.read_images(split, row, rows, out);
      read_seconds_ += clock.seconds();
    });
  };
  std::vector<uint64_t> read_ticket(static_cast<size_t>(std::max<int64_t>(slots, 1)), 0);
  uint64_t write_ticket[2] = {0, 0}, last = 0;
  for (int64_t k = 0; k < slots; ++k) last = read_ticket[size_t(k)] = queue_read(k);
  int64_t pair = 0;
  for (int64_t k = 0; k < chunks; ++k) {
    const size_t p = static_cast<size_t>(k % slots);
    const int64_t row = first + k * chunk_, rows = rows_of(k);
    wait(read_ticket[p], cae::Phase::read);
    for (int v = 0; v < nviews; ++v, ++pair) {
      const int f = static_cast<int>(pair % 2);
      wait(write_ticket[f], cae::Phase::write);
      Code* features = reinterpret_cast<Code*>(features_.data() + f * chunk_ * encoder_.architecture().latent_dim());
      {
        cae::PhaseScope computing(cae::Phase::compute);
        const cae::ImageView& view = views_[static_cast<size_t>(v)];
        if constexpr (std::is_same_v<Code, cae::Half>) {
          try {
            encoder_.encode_view_halves(pixels_of(k), rows, view, features, split, row);
          } catch (CodeBeyondHalf& beyond) {
            beyond.view = v;
            throw;
          }
        } else {
          encoder_.encode_view(pixels_of(k), rows, view, features, split, row);
        }
      }
      if (v + 1 == nviews && k + slots < chunks) last = read_ticket[p] = queue_read(k + slots);
      last = write_ticket[f] = io_->push([this, &sink, row, rows, v, features] {
        cae::Stopwatch clock;
        sink(row, rows, v, features);
        sink_seconds_ += clock.seconds();
      });
    }
    if (progress) progress(k * chunk_ + rows);
  }
  wait(last, cae::Phase::write);
}

void EncodePipeline::wait(uint64_t ticket, cae::Phase phase) {
  cae::PhaseScope waiting(phase);
  io_->wait(ticket);
}

}  // namespace ae
