#include "tokenizer/hf_tokenizer_json.h"

#include "deferkv/error.h"

namespace deferkv {
namespace {

using nlohmann::json;

std::string type_of(const json& node) { return node.is_object() ? node.value("type", "") : ""; }

// A Sequence flattened; null gives nothing.
std::vector<json> flatten(const json& node, const char* list_key) {
  std::vector<json> out;
  if (node.is_null()) return out;
  if (type_of(node) == "Sequence") {
    for (const auto& child : node.at(list_key)) {
      for (auto& leaf : flatten(child, list_key)) out.push_back(std::move(leaf));
    }
  } else {
    out.push_back(node);
  }
  return out;
}

// "\Q...\E" quotes a literal split string for PCRE2 (an \E inside is split off).
std::string quote_literal(const std::string& text) {
  std::string out = "\\Q";
  for (size_t pos = 0; pos < text.size(); ++pos) {
    if (text.compare(pos, 2, "\\E") == 0) {
      out += "\\E\\\\E\\Q";
      ++pos;
    } else {
      out += text[pos];
    }
  }
  return out + "\\E";
}

// The byte-level pre-tokenizer as regexes, from the Split / ByteLevel / Digits /
// Punctuation steps of the file.
PreTokenizerConfig byte_level_pre(const std::vector<json>& steps, const std::string& path) {
  PreTokenizerConfig pre{"tokenizer.json", {}, false, false};
  for (const json& step : steps) {
    const std::string type = type_of(step);
    if (type == "Split") {
      if (step.value("behavior", "") != "Isolated" || step.value("invert", false)) {
        fail(
            "{}: only Split pre-tokenizers with behavior Isolated are supported; pass a "
            "pre-tokenizer name instead",
            path);
      }
      const json& pattern = step.at("pattern");
      pre.patterns.push_back(pattern.contains("Regex") ? pattern.at("Regex").get<std::string>()
                                                       : quote_literal(pattern.at("String")));
    } else if (type == "ByteLevel") {
      if (step.value("add_prefix_space", false)) {
        fail("{}: ByteLevel add_prefix_space is not supported", path);
      }
      if (step.value("use_regex", true)) {
        pre.patterns.push_back(pre_tokenizer_config("gpt-2").patterns.front());
      }
    } else if (type == "Digits") {
      pre.patterns.push_back(step.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
    } else if (type == "Punctuation") {
      // HF counts all ASCII punctuation, symbols like $ + < included, as punctuation.
      pre.patterns.push_back(R"([\p{P}\$\+<=>\^~\|`]+)");
    } else {
      fail("{}: pre-tokenizer '{}' is not supported; pass a pre-tokenizer name instead", path,
           type);
    }
  }
  return pre;
}

bool any_of_type(const std::vector<json>& steps, const char* type) {
  for (const json& step : steps) {
    if (type_of(step) == type) return true;
  }
  return false;
}

// SentencePiece-style files write ' ' as U+2581 either with normalizers (Prepend "▁" +
// Replace " " -> "▁", Llama-2) or with a Metaspace pre-tokenizer (newer files).
// Returns whether a space goes before the text; Error for layouts not understood.
bool sentencepiece_space_prefix(const std::vector<json>& normalizers,
                                const std::vector<json>& pre_steps, const std::string& path) {
  for (const json& step : pre_steps) {
    if (type_of(step) != "Metaspace") continue;
    if (step.value("split", false)) fail("{}: Metaspace with split=true is not supported", path);
    const std::string scheme = step.value("prepend_scheme", "");
    return scheme.empty() ? step.value("add_prefix_space", true) : scheme != "never";
  }
  bool prepend = false;
  for (const json& step : normalizers) {
    if (type_of(step) == "Prepend") prepend = true;
  }
  return prepend;
}

// The post-processor's single-sequence template: a special token before the text is
// BOS, one after it EOS.
void apply_post_processor(const json& post, Vocab& vocab, const std::string& path) {
  if (type_of(post) != "TemplateProcessing") return;
  bool seen_text = false;
  for (const json& item : post.at("single")) {
    if (item.contains("Sequence")) {
      seen_text = true;
    } else if (item.contains("SpecialToken")) {
      const std::string text = item.at("SpecialToken").at("id");
      const int32_t id = require_token(vocab, text, "post_processor token", path);
      if (seen_text) {
        vocab.eos = id;
        vocab.add_eos = true;
      } else {
        vocab.bos = id;
        vocab.add_bos = true;
      }
    }
  }
}

TokenizerSpec parse(const json& root, const std::string& path, const HfConfig& config,
                    const TokenizerOptions& options) {
  const json& model = root.at("model");
  if (type_of(model) != "BPE") {
    fail("{}: model type '{}' is not supported (only BPE)", path, type_of(model));
  }
  std::vector<std::pair<std::string, int32_t>> base;
  for (const auto& [text, id] : model.at("vocab").items())
    base.emplace_back(text, json_token_id(id, text, path));
  std::vector<AddedToken> added = config.added_tokens;
  if (const auto it = root.find("added_tokens"); it != root.end()) {
    for (const json& token : *it) {
      added.push_back(read_added_token(json_token_id(token.at("id"), token.value("content", ""), path), token));
    }
  }

  TokenizerSpec spec;
  spec.vocab = layout_vocab(base, added, path);
  const json& merges = model.at("merges");
  spec.merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& merge = merges[rank];
    if (merge.is_array()) {  // newer files: ["Ġ", "t"]
      spec.merges.emplace_back(merge.at(0).get<std::string>(), merge.at(1).get<std::string>());
    } else {
      spec.merges.push_back(split_merge(merge.get<std::string>(), path, rank));
    }
  }

  const auto pre_steps = flatten(root.value("pre_tokenizer", json()), "pretokenizers");
  const auto normalizers = flatten(root.value("normalizer", json()), "normalizers");
  const bool byte_level =
      any_of_type(pre_steps, "ByteLevel") || type_of(root.value("decoder", json())) == "ByteLevel";
  if (byte_level) {
    spec.family = TokenizerFamily::kByteLevel;
    spec.model_name = "gpt2";
    spec.pre =
        options.pre.empty() ? byte_level_pre(pre_steps, path) : pre_tokenizer_config(options.pre);
    spec.pre.ignore_merges = spec.pre.ignore_merges || model.value("ignore_merges", false);
  } else if (any_of_type(pre_steps, "Metaspace") || any_of_type(normalizers, "Replace")) {
    spec.family = TokenizerFamily::kSentencePiece;
    spec.model_name = "llama";
    spec.add_space_prefix = sentencepiece_space_prefix(normalizers, pre_steps, path);
    spec.byte_fallback = model.value("byte_fallback", false);
    for (int32_t id = 0; id < spec.vocab.size(); ++id) {
      const std::string& text = spec.vocab.texts[id];
      if (spec.byte_fallback && spec.vocab.kinds[id] == TokenKind::kNormal && text.size() == 6 &&
          text.starts_with("<0x") && text.ends_with(">")) {
        spec.vocab.kinds[id] = TokenKind::kByte;
      }
    }
  } else {
    fail("{}: neither a byte-level nor a SentencePiece-style BPE tokenizer", path);
  }

  if (model.contains("unk_token") && model.at("unk_token").is_string()) {
    spec.vocab.unk = require_token(spec.vocab, model.at("unk_token"), "unk_token", path);
    spec.vocab.kinds[spec.vocab.unk] = TokenKind::kUnknown;
  }
  apply_post_processor(root.value("post_processor", json()), spec.vocab, path);
  apply_config(config, spec.vocab, path);
  return spec;
}

}  // namespace

TokenizerSpec read_tokenizer_json(const std::string& path, const HfConfig& config,
                                  const TokenizerOptions& options) {
  const json root = read_json_file(path);
  try {
    return parse(root, path, config, options);
  } catch (const json::exception& e) {  // a missing field or one of the wrong type
    fail("{}: unexpected content: {}", path, e.what());
  }
}

}  // namespace deferkv
