// The dashboard's files, built into the binary by cmake/EmbedFile.cmake (lib/CMakeLists.txt names the
// sources): the page from lib/dedloc/monitor/dashboard/, Chart.js from Debian's libjs-chart.js.
#pragma once

#include <string_view>

extern const std::string_view dedloc_asset_dashboard_html;
extern const std::string_view dedloc_asset_chart_js;
