#!/usr/bin/python3
"""Records the expected scores in reference_vectors.json by running the reference
Python scorers on the inputs below. CI never runs this; the JSON it wrote is committed.

How reference_vectors.json was made (Debian 12, /usr/bin/python3 = CPython 3.11.2):
  apt-get install python3-nltk python3-levenshtein python3-fuzzywuzzy python3-jieba \
                  python3-six python3-numpy
  # reference sources, unmodified, outside the repository:
  #   THUDM/LongBench@2e00731   LongBench/metrics.py, LongBench/eval.py  -> $LB
  #   pltrdy/rouge@c1b90a7      rouge/ (the `rouge` 1.0.1 package)       -> $PLTRDY/rouge
  #   NVIDIA/RULER@c3f5e3b      scripts/eval/synthetic/constants.py      -> $RULER_CONSTANTS
  #   google-research/google-research rouge/{rouge_scorer,tokenize,scoring}.py (rouge_score)
  #                                                                      -> $GROUGE/rouge
  tests/data/eval/record_reference_vectors.py --longbench $LB --pltrdy $PLTRDY \
      --ruler-constants $RULER_CONSTANTS --rouge-score $GROUGE \
      > tests/data/eval/reference_vectors.json

fuzzywuzzy 0.18 finds python-Levenshtein 0.12.2, so code_sim uses the Levenshtein
backend. NLTK is 3.8 (PorterStemmer in its default NLTK_EXTENSIONS mode).
"""
import argparse
import importlib.util
import json
import os
import random
import re
import sys


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# RULER scripts/eval/evaluate.py postprocess_pred, restated (evaluate.py itself imports
# NeMo): strip, control characters to newlines, strip.
def ruler_postprocess(pred):
    return re.sub(r"[\x00-\x1f]", "\n", pred.strip()).strip()


TREC_CLASSES = ["Food", "Date", "Order, rank", "Speed", "Disease and medicine", "State", "City",
                "Country", "Other location", "Lasting time of somethin", "Description of something",
                "Description of a person", "Definition of something", "Number of something",
                "Other number", "Individual", "Title of a person", "Expression abbreviated",
                "Abbreviation"]

QA_CASES = [
    ("The BERT-base model", "BERT base"),
    ("The BERT-base model", "bertbase"),
    ("a\u00a0b c", "a b c"),               # NBSP splits (and 'a' is an article)
    ("x\u00a0y z", "x y z"),
    ("x\u200by z", "x y z"),               # ZWSP does not split
    ("The Eiffel Tower, in Paris.", "Eiffel Tower"),
    ("an apple a day", "the apple"),
    ("the_the theory", "theory"),          # '_' is removed before the article pass
    ("thé the éthe", "the"),               # Unicode word boundaries
    ("İstanbul", "i̇stanbul"),              # full lower-casing: İ -> i + U+0307
    ("ΟΔΟΣ", "οδος"),                      # final sigma: ΟΔΟΣ -> οδος
    ("ΟΔΟΣ", "οδοσ"),
    ("Straße", "STRASSE"),                 # lower() is no casefold
    ("５ apples", "5 apples"),
    ("“quoted” answer", "quoted answer"),   # curly quotes are not ASCII punctuation
    ("1,000 people", "1000 people"),
    ("", "anything"),
    ("the a an", "the"),                   # nothing left on either side
    ("yes yes no", "yes no no"),
]

ROUGE_CASES = [
    ("the cat sat on the mat", "the cat sat on the mat"),
    ("b a", "a b. b"),
    ("a b. b", "b a"),
    ("It rose 3.5 percent in the U.S. market.", "The U.S. market rose 3.5 percent."),
    ("word. ", "word"),                    # a trailing space after the last period: an empty token
    ("word", "word. "),
    ("", "a b c"),
    ("...", "a b c"),
    ("a b c", "..."),
    ("  spaced   out  text  ", "spaced out text"),
    ("The Cat sat", "the cat sat"),        # case-sensitive
    ("cat, dog", "cat dog"),               # punctuation stays on the word
    ("a a a b b", "a b a b"),              # set semantics
    ("x y z. z y x. y", "x z y. y x z"),
    ("one two three four five", "five four three two one"),
    ("Summary:\nfirst line.\nsecond line", "first line. second line."),
    ("a\u00a0b", "a b"),
]

CLASSIFICATION_CASES = [
    ("Location", "Other location"),
    ("United States", "Country"),          # "State" matches inside "United States"
    ("State", "State"),
    ("Other location or City", "Other location"),
    ("Lasting time of something", "Lasting time of somethin"),
    ("Description of something and Description of a person", "Description of a person"),
    ("Number of something, Other number", "Other number"),
    ("Abbreviation, Expression abbreviated", "Abbreviation"),
    ("Food Date Speed", "Date"),
    ("nothing relevant", "Food"),
]

# Classes where the remove-while-iterating skip changes the result: the two matches
# "Other" and "location" are both parts of the ground truth; only the first is removed.
SKIP_CLASSES = ["Other", "location", "Other location", "City"]
SKIP_CASES = [("Other location", "Other location"), ("Other location, City", "Other location")]

RETRIEVAL_CASES = [
    ("Paragraph 12", "Paragraph 12"),
    ("The answer is Paragraph 12, not 3", "Paragraph 12"),
    ("Paragraph 4", "Paragraph 12"),
    ("no number", "Paragraph 12"),
    ("Paragraph ١٢ or 12", "Paragraph 12"),   # Arabic-Indic digits are a number of their own
    ("１２ and 12", "Paragraph 12"),          # full-width digits too
    ("112", "Paragraph 12"),
]

COUNT_CASES = [("5", "5"), ("There are 5 paragraphs, 5 unique", "5"), ("4 or 5", "5"),
               ("٥", "5"), ("none", "5"), ("05", "5")]

CODE_CASES = [
    ("x = 1", "x = 1"),
    ("\n\nreturn a + b\nfoo()", "return a + b"),
    ("# comment\nreturn a + b", "return a + b"),
    ("```python\nreturn a+b\n```", "return a + b"),
    ("url = 'http://x'\nreturn y", "return y"),       # '//' disqualifies the first line
    ("x = 1\r\ny = 2", "x = 1"),                      # the '\r' stays
    ("", "x = 1"),
    ("# only comments", "x = 1"),
    ("abcdefgh", "abcxyzgh"),
    ("abcdwxyz", "abcdefgh"),
    ("kitten", "sitting"),
    ("naïve café", "naive cafe"),
    ("数据 = load()", "数据 = load(x)"),
]

RULER_CASES = [
    ("string_match_all", ["The special magic number is 93961587."], [["3961587"]]),
    ("string_match_all", ["  numbers: 123 and 456  "], [["123", "456", "789"]]),
    ("string_match_all", ["ANSWER: Paris"], [["paris"]]),
    ("string_match_all", ["anything"], [[""]]),
    ("string_match_all", ["a\tb"], [["a\tb"]]),       # the tab became a newline
    ("string_match_all", ["a\nb"], [["a\nb"]]),
    ("string_match_all", ["İstanbul"], [["i̇stanbul"]]),
    ("string_match_all", ["one", "two three"], [["one", "two"], ["three", "four"]]),
    ("string_match_part", ["the answer is Rome"], [["Paris", "Rome"]]),
    ("string_match_part", ["the answer is Rome"], [["Paris", "London"]]),
    ("string_match_part", ["x", "Paris!", "no"], [["paris"], ["PARIS"], ["yes"]]),
]

NIAH_NEEDLE = "The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day."
NIAH_CASES = [
    (NIAH_NEEDLE, NIAH_NEEDLE),
    ("Eating a sandwich and sitting in Dolores Park on a sunny day.", NIAH_NEEDLE),
    ("The best things to do in San Francisco are eating sandwiches in Dolores Park.", NIAH_NEEDLE),
    ("I don't know.", NIAH_NEEDLE),
    ("", NIAH_NEEDLE),
    ("Generalizations, relational conditionals: hopefulness; électricité", "generalize relate conditional hope electric"),
    ("KELVIN \u212a İ", "k i"),
]

PORTER_WORDS = [
    "caresses", "ponies", "ties", "caress", "cats", "feed", "agreed", "plastered", "bled",
    "motoring", "sing", "conflated", "troubled", "sized", "hopping", "tanned", "falling",
    "hissing", "fizzed", "failing", "filing", "happy", "sky", "skies", "dying", "lying", "tying",
    "news", "innings", "outings", "cannings", "howe", "proceed", "exceed", "succeed", "flies",
    "dies", "spied", "died", "enjoy", "spy", "fly", "try", "relational", "conditional",
    "rational", "valenci", "hesitanci", "digitizer", "conformabli", "radicalli", "differentli",
    "vileli", "analogousli", "vietnamization", "predication", "operator", "feudalism",
    "decisiveness", "hopefulness", "callousness", "formaliti", "sensitiviti", "sensibiliti",
    "triplicate", "formative", "formalize", "electriciti", "electrical", "hopeful", "goodness",
    "revival", "allowance", "inference", "airliner", "gyroscopic", "adjustable", "defensible",
    "irritant", "replacement", "adjustment", "dependent", "adoption", "homologou",
    "communism", "activate", "angulariti", "homologous", "effective", "bowdlerize", "probate",
    "rate", "cease", "controll", "roll", "generalizations", "oscillators", "archaeology",
    "geology", "theology", "analogi", "beautifulli", "hopefulli", "typically", "really",
    "meeting", "meetings", "syzygy", "toying", "yelling", "yyyy", "abed", "ying", "abilities",
    "agreement", "sandwich", "francisco", "dolores", "sunny", "sitting", "eating", "best",
    "thing", "park", "2024", "1st", "a1b2", "oed", "ied", "eed", "ized", "ated", "bled",
]


# NIAH's haystack: the first 644051 bytes of data/ruler/PaulGrahamEssays.json are the 49
# Paul Graham essays (the words of the 49 files, which is all this reads, are the same).
ESSAY_BYTES = 644051


def essay_words(path, limit):
    with open(path, encoding="utf-8") as f:
        text = json.load(f)["text"].encode("utf-8")[:ESSAY_BYTES].decode("utf-8", "ignore").lower()
    words = set(w for w in re.split(r"[^a-z0-9]+", text) if len(w) > 3)
    ordered = sorted(words)
    step = max(1, len(ordered) // limit)
    return ordered[::step]


def random_rouge_cases(rng, count):
    vocabulary = ["a", "b", "c", "d", "e", "the", "cat", "A"]
    cases = []
    for _ in range(count):
        texts = []
        for _ in range(2):
            pieces = []
            for _ in range(rng.randint(1, 12)):
                pieces.append(rng.choice(vocabulary))
                r = rng.random()
                if r < 0.15:
                    pieces.append(".")
                elif r < 0.2:
                    pieces.append(" ")
            texts.append(" ".join(pieces))
        cases.append(tuple(texts))
    return cases


def random_code_cases(rng, count):
    alphabet = "abcxyz =()é数"
    return [("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14))),
             "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14)))) for _ in range(count)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--longbench", required=True)
    parser.add_argument("--pltrdy", required=True)
    parser.add_argument("--ruler-constants", required=True)
    parser.add_argument("--rouge-score", required=True)
    parser.add_argument("--essays", default=os.path.join(os.path.dirname(__file__), "../../../data/ruler/PaulGrahamEssays.json"),
                        help="RULER's essay haystack JSON (default: the repository's data/ruler/PaulGrahamEssays.json)")
    args = parser.parse_args()
    rng = random.Random(42)

    sys.path[:0] = [args.pltrdy, args.longbench]
    metrics = load_module("lb_metrics", os.path.join(args.longbench, "metrics.py"))
    sys.modules["metrics"] = metrics
    lb_eval = load_module("lb_eval", os.path.join(args.longbench, "eval.py"))
    ruler = load_module("ruler_constants", args.ruler_constants)

    out = {"produced_by": "tests/data/eval/record_reference_vectors.py (see its docstring)"}
    cases = []
    for pred, ref in QA_CASES:
        cases.append({"metric": "qa_f1", "pred": pred, "ref": ref, "score": metrics.qa_f1_score(pred, ref)})
    for pred, ref in ROUGE_CASES + random_rouge_cases(rng, 150):
        cases.append({"metric": "rouge", "pred": pred, "ref": ref, "score": metrics.rouge_score(pred, ref)})
    for pred, ref in CLASSIFICATION_CASES:
        cases.append({"metric": "classification", "pred": pred, "ref": ref, "all_classes": TREC_CLASSES,
                      "score": metrics.classification_score(pred, ref, all_classes=TREC_CLASSES)})
    for pred, ref in SKIP_CASES:
        cases.append({"metric": "classification", "pred": pred, "ref": ref, "all_classes": SKIP_CLASSES,
                      "score": metrics.classification_score(pred, ref, all_classes=SKIP_CLASSES)})
    for pred, ref in RETRIEVAL_CASES:
        cases.append({"metric": "retrieval", "pred": pred, "ref": ref, "score": metrics.retrieval_score(pred, ref)})
    for pred, ref in COUNT_CASES:
        cases.append({"metric": "count", "pred": pred, "ref": ref, "score": metrics.count_score(pred, ref)})
    for pred, ref in CODE_CASES + random_code_cases(rng, 100):
        cases.append({"metric": "code_sim", "pred": pred, "ref": ref, "score": metrics.code_sim_score(pred, ref)})
    out["metric_cases"] = cases

    datasets = [
        ("trec", ["\n\nLocation\nState", "Country of origin", "City"], [["Other location"], ["Country"], ["City"]],
         TREC_CLASSES),
        ("triviaqa", ["Paris\nThe capital", "\nLondon", "Rome is it"], [["Paris"], ["London", "UK"], ["Roma"]], None),
        ("samsum", ["Tom will buy milk.\nAnd bread.", "Ann is late."], [["Tom buys milk."], ["Ann will be late."]], None),
        ("hotpotqa", ["yes", "no", "the answer"], [["yes"], ["yes"], ["answer", "the answer"]], None),
        ("passage_count", ["3", "3 4", "7"], [["3"], ["3"], ["8"]], None),
        ("lcc", ["x = 1", "y", "z = a + b"], [["x = 1"], ["y = 2"], ["z = a - b"]], None),
    ]
    out["dataset_cases"] = [
        {"dataset": d, "preds": p, "answers": a, "all_classes": c, "score": lb_eval.scorer(d, p, a, c)}
        for d, p, a, c in datasets]

    out["ruler_cases"] = []
    for metric, preds, refs in RULER_CASES:
        processed = [ruler_postprocess(p) for p in preds]
        out["ruler_cases"].append({"metric": metric, "preds": preds, "refs": refs,
                                   "score": getattr(ruler, metric)(processed, refs)})

    # Google's rouge_score, whose package is also named `rouge`.
    for name in [m for m in sys.modules if m == "rouge" or m.startswith("rouge.")]:
        del sys.modules[name]
    sys.path.insert(0, args.rouge_score)
    from rouge import rouge_scorer
    from nltk.stem import porter
    scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    out["niah_cases"] = [{"pred": p, "ref": r, "fmeasure": scorer.score(r, p)["rouge1"].fmeasure}
                         for p, r in NIAH_CASES]
    stemmer = porter.PorterStemmer()
    words = sorted(set(PORTER_WORDS) | set(essay_words(args.essays, 1500)))
    out["porter_stems"] = {w: stemmer.stem(w) for w in words}

    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
