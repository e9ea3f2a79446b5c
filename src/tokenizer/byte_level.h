#pragma once
// The GPT-2 byte-level alphabet: byte-level BPE vocabularies spell every byte as one
// printable character, so that token texts are valid UTF-8 with no spaces or control
// characters ("Ġ" stands for the byte 0x20). This maps bytes to those characters and back.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace deferkv {

// The UTF-8 of the character that stands for each byte.
const std::array<std::string, 256>& byte_level_chars();

// Each byte of `bytes` written as its character.
std::string byte_level_encode(std::string_view bytes);

// Turns the characters of a vocabulary entry back into bytes. False when a character is
// not in the alphabet (the entry then is not byte-level text); `out` is unspecified then.
bool byte_level_decode(std::string_view text, std::string& out);

}  // namespace deferkv
