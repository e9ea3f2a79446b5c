#include "base/setting.h"

#include <gtest/gtest.h>

#include <string>

namespace deferkv {
namespace {

enum class Colour { kRed, kDarkBlue };
constexpr SettingName<Colour> kColours[] = {{"red", Colour::kRed}, {"dark-blue", Colour::kDarkBlue}};

TEST(Setting, NamesMatchWithoutRegardToCase) {
  EXPECT_EQ(parse_setting<Colour>("COLOUR", "red", "a colour", kColours), Colour::kRed);
  EXPECT_EQ(parse_setting<Colour>("COLOUR", "Dark-BLUE", "a colour", kColours), Colour::kDarkBlue);
  EXPECT_EQ(ascii_lower("AbC-9_Z"), "abc-9_z");
}

TEST(Setting, AnUnknownValueNamesTheVariableTheValueAndTheKnownNames) {
  for (const char* value : {"green", "", "red ", "dark_blue"}) {
    try {
      parse_setting<Colour>("COLOUR", value, "a colour", kColours);
      ADD_FAILURE() << "no error for '" << value << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "COLOUR='" + std::string(value) + "' is not a colour (known: red, dark-blue)");
    }
  }
}

}  // namespace
}  // namespace deferkv
