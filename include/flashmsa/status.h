// FlashMSA — status and error type.
//
// Every public operation returns a Status. An error message always names the
// operation, the argument, what was expected and what was given, e.g.
//   "flashmsa::sparse_attention_prefill: argument 'q': expected dtype bf16 or e4m3, got f32"
// No operation throws, aborts or calls exit() on bad input.
#pragma once

#include <string>
#include <utility>

namespace flashmsa {

/// Error category of a Status.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  ///< a tensor or scalar argument violates the documented contract
  kUnsupported,      ///< valid request that this build / backend does not implement
  kInternal,         ///< the backend failed: a CUDA launch or allocation error (message names it), or a bug
};

/// Result of an operation: ok, or a code plus a human-readable message.
class Status {
 public:
  Status() = default;  ///< ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  /// Builds the canonical argument error:
  /// "flashmsa::<op>: argument '<arg>': expected <expected>, got <actual>".
  static Status InvalidArgument(const std::string& op, const std::string& arg,
                                const std::string& expected, const std::string& actual);
  /// "flashmsa::<op>: <what> is not supported: <detail>".
  static Status Unsupported(const std::string& op, const std::string& what,
                            const std::string& detail);
  static Status Internal(const std::string& op, const std::string& detail);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace flashmsa

/// Propagates a non-ok Status to the caller.
#define FLASHMSA_RETURN_IF_ERROR(expr)              \
  do {                                              \
    ::flashmsa::Status _flashmsa_status = (expr);   \
    if (!_flashmsa_status.ok()) return _flashmsa_status; \
  } while (0)
