#include "deferkv/model.h"

#include "deferkv/tokenizer.h"
#include "model/model_weights.h"
#include "tensor/gguf_file.h"

namespace deferkv {

std::shared_ptr<const Model> Model::load(const std::string& path) {
  std::shared_ptr<Model> model(new Model());
  model->file_ = std::make_unique<GgufFile>(path);
  model->config_ = ModelConfig::from_gguf(*model->file_);
  model->weights_ = std::make_unique<ModelWeights>(ModelWeights::from_gguf(*model->file_, model->config_));
  model->tokenizer_ = Tokenizer::from_gguf(*model->file_);
  return model;
}

Model::~Model() = default;

const std::string& Model::path() const { return file_->path(); }

}  // namespace deferkv
