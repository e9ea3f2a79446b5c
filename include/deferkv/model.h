#pragma once
// A model loaded from a GGUF file: configuration, weights (memory-mapped, used in
// place) and tokenizer. Immutable once loaded, so many sessions can share it.
#include <memory>
#include <string>

#include "deferkv/model_config.h"

namespace deferkv {

class GgufFile;
class Tokenizer;
struct ModelWeights;

class Model {
 public:
  // Loads `path`; errors name the file and the key or tensor at fault.
  static std::shared_ptr<const Model> load(const std::string& path);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& gguf() const { return *file_; }
  const ModelWeights& weights() const { return *weights_; }
  const std::string& path() const;

 private:
  Model() = default;
  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace deferkv
