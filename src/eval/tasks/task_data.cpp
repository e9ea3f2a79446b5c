#include "eval/tasks/task_data.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "deferkv/error.h"
#include "eval/tasks/template_text.h"

namespace deferkv::eval {
namespace {

// Bytes of the 49 gkamradt essays at the start of RULER's essay text (checked by a test
// against the end of the last of them, worked.txt).
constexpr size_t kNiahEssayBytes = 644051;

std::string read_data_file(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {} '{}' (the data folder is set with --data-dir)", what, path);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

}  // namespace

TaskData::TaskData(std::string data_dir, std::string squad_path, std::string hotpotqa_path, WordSplit word_split)
    : data_dir_(std::move(data_dir)),
      squad_path_(std::move(squad_path)),
      hotpotqa_path_(std::move(hotpotqa_path)),
      word_split_(word_split) {}

const std::string& TaskData::essay_text() const {
  if (!essay_text_) {
    const std::string path = data_dir_ + "/ruler/PaulGrahamEssays.json";
    const std::string raw = read_data_file(path, "the essay haystack");
    const auto json = nlohmann::json::parse(raw, nullptr, false);
    if (!json.is_object() || !json.contains("text") || !json["text"].is_string()) {
      fail("'{}' is not RULER's essay file: a JSON object with a \"text\" string", path);
    }
    essay_text_ = json["text"].get<std::string>();
    if (essay_text_->size() < kNiahEssayBytes) fail("'{}' is shorter than RULER's essay file", path);
  }
  return *essay_text_;
}

const std::vector<std::string>& TaskData::essay_words() const {
  if (!essay_words_) essay_words_ = split_on_whitespace_runs(essay_text());
  return *essay_words_;
}

std::string_view TaskData::niah_essays() const {
  return std::string_view(essay_text()).substr(0, kNiahEssayBytes);
}

const std::vector<std::string>& TaskData::word_list(std::optional<std::vector<std::string>>& slot,
                                                    const char* file) const {
  if (!slot) {
    const std::string text = read_data_file(data_dir_ + "/ruler/wonderwords/" + file, "the word list");
    std::vector<std::string> words;
    std::istringstream lines(text);
    int64_t line_number = 0;
    for (std::string line; std::getline(lines, line); ++line_number) {
      const bool even = line_number % 2 == 0;
      if ((word_split_ == WordSplit::kTrain && !even) || (word_split_ == WordSplit::kHeldOut && even)) continue;
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
      words.push_back(std::move(line));
    }
    slot = std::move(words);
  }
  return *slot;
}

const std::vector<std::string>& TaskData::nouns() const { return word_list(nouns_, "nounlist.txt"); }
const std::vector<std::string>& TaskData::adjectives() const { return word_list(adjectives_, "adjectivelist.txt"); }
const std::vector<std::string>& TaskData::verbs() const { return word_list(verbs_, "verblist.txt"); }

const QaDataset& TaskData::squad() const {
  if (!squad_) {
    if (squad_path_.empty()) fail("qa_1 reads SQuAD v2 dev (dev-v2.0.json): give its path with --squad");
    squad_ = read_squad(squad_path_);
  }
  return *squad_;
}

const QaDataset& TaskData::hotpotqa() const {
  if (!hotpotqa_) {
    if (hotpotqa_path_.empty()) {
      fail("qa_2 reads HotpotQA dev (hotpot_dev_distractor_v1.json): give its path with --hotpotqa");
    }
    hotpotqa_ = read_hotpotqa(hotpotqa_path_);
  }
  return *hotpotqa_;
}

}  // namespace deferkv::eval
