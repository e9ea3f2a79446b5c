#include "eval/tasks/qa_datasets.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "deferkv/error.h"

namespace deferkv::eval {
namespace {

using nlohmann::json;

json read_json(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read the {} file '{}'", what, path);
  std::ostringstream text;
  text << in.rdbuf();
  json value = json::parse(text.str(), nullptr, false);
  if (value.is_discarded()) fail("the {} file '{}' is not valid JSON", what, path);
  return value;
}

const json& member(const json& object, const char* name, const std::string& path) {
  if (!object.is_object() || !object.contains(name)) fail("'{}': an entry has no \"{}\"", path, name);
  return object[name];
}

std::string text_member(const json& object, const char* name, const std::string& path) {
  const json& value = member(object, name, path);
  if (!value.is_string()) fail("'{}': \"{}\" must be a string", path, name);
  return value.get<std::string>();
}

// Sorted distinct documents and each one's index (Python's sorted(set(docs))).
std::map<std::string, int64_t> index_documents(std::vector<std::string> docs, QaDataset& out) {
  std::sort(docs.begin(), docs.end());
  docs.erase(std::unique(docs.begin(), docs.end()), docs.end());
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < docs.size(); ++i) index.emplace(docs[i], static_cast<int64_t>(i));
  out.docs = std::move(docs);
  return index;
}

}  // namespace

QaDataset read_squad(const std::string& path) {
  const json root = read_json(path, "SQuAD");
  const json& articles = member(root, "data", path);
  if (!articles.is_array()) fail("'{}': \"data\" must be a list of articles", path);
  QaDataset out{path, {}, {}};
  std::vector<std::string> all;
  for (const json& article : articles) {
    for (const json& p : member(article, "paragraphs", path)) all.push_back(text_member(p, "context", path));
  }
  const auto index = index_documents(std::move(all), out);
  for (const json& article : articles) {
    std::vector<int64_t> article_docs;
    for (const json& p : article["paragraphs"]) article_docs.push_back(index.at(p["context"].get<std::string>()));
    for (const json& p : article["paragraphs"]) {
      const int64_t gold = index.at(p["context"].get<std::string>());
      for (const json& qa : member(p, "qas", path)) {
        const json& impossible = member(qa, "is_impossible", path);
        if (!impossible.is_boolean()) fail("'{}': \"is_impossible\" must be true or false", path);
        if (impossible.get<bool>()) continue;
        QaItem item{text_member(qa, "question", path), {}, {gold}, {}};
        for (const json& answer : member(qa, "answers", path)) item.answers.push_back(text_member(answer, "text", path));
        for (int64_t d : article_docs) {
          if (d != gold) item.same_article_docs.push_back(d);
        }
        out.items.push_back(std::move(item));
      }
    }
  }
  return out;
}

QaDataset read_hotpotqa(const std::string& path) {
  const json root = read_json(path, "HotpotQA");
  if (!root.is_array()) fail("'{}': HotpotQA dev is a list of questions", path);
  // A context paragraph [title, [sentence, ...]] as RULER writes it: title, newline, sentences joined.
  const auto document = [&](const json& paragraph) {
    if (!paragraph.is_array() || paragraph.size() != 2 || !paragraph[0].is_string() || !paragraph[1].is_array()) {
      fail("'{}': a context paragraph must be [title, [sentences]]", path);
    }
    std::string text = paragraph[0].get<std::string>() + "\n";
    for (const json& sentence : paragraph[1]) {
      if (!sentence.is_string()) fail("'{}': sentences must be strings", path);
      text += sentence.get<std::string>();
    }
    return text;
  };
  QaDataset out{path, {}, {}};
  std::vector<std::string> all;
  for (const json& q : root) {
    for (const json& paragraph : member(q, "context", path)) all.push_back(document(paragraph));
  }
  const auto index = index_documents(std::move(all), out);
  for (const json& q : root) {
    QaItem item{text_member(q, "question", path), {text_member(q, "answer", path)}, {}, {}};
    for (const json& paragraph : q["context"]) item.gold_docs.push_back(index.at(document(paragraph)));
    out.items.push_back(std::move(item));
  }
  return out;
}

}  // namespace deferkv::eval
