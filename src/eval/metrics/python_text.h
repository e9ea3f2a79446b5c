#pragma once
// The Python `str` operations the official scorers are written with, on UTF-8 text.
// Python works on code points, lower-cases with Unicode's full mappings (İ → i + U+0307,
// a word-final Σ → ς) and has its own whitespace set; a faithful score needs all three.
// Text is assumed to be valid UTF-8 (the public scoring API checks it on entry).
#include <string>
#include <string_view>
#include <vector>

namespace deferkv::eval {

std::u32string to_code_points(std::string_view utf8);
void append_utf8(std::string& out, char32_t code_point);

// str.lower()
std::string python_lower(std::string_view text);

// str.isspace() of one character: categories Zs, bidi classes WS, B and S (this takes in
// NBSP and U+001C..U+001F, but not the zero-width space U+200B).
bool is_python_space(char32_t code_point);

// str.split(): runs of Python whitespace separate the words; no empty words.
std::vector<std::string> python_split(std::string_view text);

// " ".join(text.split())
std::string collapse_whitespace(std::string_view text);

// str.strip()
std::string_view python_strip(std::string_view text);

// str.split(separator) for a one-byte separator: n separators give n + 1 pieces.
std::vector<std::string_view> split_on(std::string_view text, char separator);

// str.lstrip(characters) for single-byte characters.
std::string_view lstrip_chars(std::string_view text, std::string_view characters);

}  // namespace deferkv::eval
