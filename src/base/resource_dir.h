#pragma once
// Where the embedded models (models/) and evaluation data (data/) are, so a build moved
// elsewhere or installed with `cmake --install` keeps its defaults. In this order:
//   1. $DEFERKV_HOME, when set (a folder holding models/ and data/);
//   2. next to the executable's folder, as in the build tree (<checkout>/build/deferkv
//      finds <checkout>/models);
//   3. <prefix>/share/deferkv, for an installed <prefix>/bin/deferkv;
//   4. the source folder the build was configured from.
// The first that holds models/stories260K.gguf wins (1 wins whenever it is set, so a
// wrong $DEFERKV_HOME shows up as a missing file naming it).
#include <optional>
#include <string>

namespace deferkv {

std::string resource_dir();

// The rule above for an executable at `executable` with $DEFERKV_HOME `home` (unset:
// nullopt) and the configured source folder `source_dir` (for tests).
std::string resource_dir_for(const std::string& executable, const std::optional<std::string>& home,
                             const std::string& source_dir);

}  // namespace deferkv
