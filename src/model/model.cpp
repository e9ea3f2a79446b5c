#include "deferkv/model.h"

#include <fmt/format.h>

#include "base/allocation_error.h"
#include "deferkv/tokenizer.h"
#include "model/model_weights.h"
#include "tensor/gguf_file.h"

namespace deferkv {

std::shared_ptr<const Model> Model::load(const std::string& path) {
  // The weights stay in the mapped file, but for the matrices copied into row groups
  // (model_weights.h); what is allocated is those, the metadata, the small vectors (norms)
  // and the tokenizer, each bounded by what the file holds.
  return naming_allocation([&] { return fmt::format("the model '{}'", path); }, [&] {
    std::shared_ptr<Model> model(new Model());
    model->file_ = std::make_unique<GgufFile>(path);
    model->config_ = ModelConfig::from_gguf(*model->file_);
    model->weights_ = std::make_unique<ModelWeights>(ModelWeights::from_gguf(*model->file_, model->config_));
    model->tokenizer_ = Tokenizer::from_gguf(*model->file_);
    return std::shared_ptr<const Model>(std::move(model));
  });
}

Model::~Model() = default;

const std::string& Model::path() const { return file_->path(); }

}  // namespace deferkv
