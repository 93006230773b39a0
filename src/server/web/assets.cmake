# The web pages of `mxserve serve` (this folder's .html/.js/.css/.svg, served under /assets/, with
# GET / and GET /dashboard answering chat.html and dashboard.html) and the browser libraries they
# use, taken from web/node_modules where `npm ci` ran there (scripts/install-deps.sh --npm), all
# embedded into mx_server as bytes by embed.cmake at build time. Without the libraries the pages
# still work: plain-text answers and simple canvas plots, with a note saying so.
set(_web_dir ${CMAKE_CURRENT_LIST_DIR})
set(_npm ${PROJECT_SOURCE_DIR}/web/node_modules)

# URL -> file of each library asset (the URLs the pages load; missing files are left out).
set(_libs
  "lib/marked.js=${_npm}/marked/lib/marked.umd.js"
  "lib/purify.js=${_npm}/dompurify/dist/purify.min.js"
  "lib/highlight.js=${_npm}/@highlightjs/cdn-assets/highlight.min.js"
  "lib/hljs-light.css=${_npm}/@highlightjs/cdn-assets/styles/github.min.css"
  "lib/hljs-dark.css=${_npm}/@highlightjs/cdn-assets/styles/github-dark.min.css"
  "lib/katex.js=${_npm}/katex/dist/katex.min.js"
  "lib/katex.css=${_npm}/katex/dist/katex.min.css"
  "lib/uplot.js=${_npm}/uplot/dist/uPlot.iife.min.js"
  "lib/uplot.css=${_npm}/uplot/dist/uPlot.min.css")
file(GLOB _fonts "${_npm}/katex/dist/fonts/*.woff2")
foreach(f IN LISTS _fonts)
  get_filename_component(name "${f}" NAME)
  list(APPEND _libs "lib/fonts/${name}=${f}")
endforeach()
# Re-configure when packages appear in (or leave) web/node_modules after this configure.
file(GLOB _npm_packages CONFIGURE_DEPENDS "${_npm}/*")

file(GLOB _own CONFIGURE_DEPENDS ${_web_dir}/*.html ${_web_dir}/*.js ${_web_dir}/*.css ${_web_dir}/*.svg)
set(_manifest "")
set(_deps ${_web_dir}/embed.cmake)
set(_found_libs 0)
foreach(f IN LISTS _own)
  get_filename_component(name "${f}" NAME)
  string(APPEND _manifest "/assets/${name}|${f}\n")
  list(APPEND _deps "${f}")
endforeach()
foreach(entry IN LISTS _libs)
  string(FIND "${entry}" "=" eq)
  string(SUBSTRING "${entry}" 0 ${eq} url)
  math(EXPR eq "${eq} + 1")
  string(SUBSTRING "${entry}" ${eq} -1 f)
  if(EXISTS "${f}")
    string(APPEND _manifest "/assets/${url}|${f}\n")
    list(APPEND _deps "${f}")
    math(EXPR _found_libs "${_found_libs} + 1")
  endif()
endforeach()
if(_found_libs EQUAL 0)
  message(STATUS "web pages: no libraries in web/node_modules (scripts/install-deps.sh --npm): plain-text answers, simple plots")
endif()

set(_gen ${CMAKE_CURRENT_BINARY_DIR}/web_assets_data.cpp)
file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/web_assets.manifest CONTENT "${_manifest}")
add_custom_command(OUTPUT ${_gen}
  COMMAND ${CMAKE_COMMAND} -DMANIFEST=${CMAKE_CURRENT_BINARY_DIR}/web_assets.manifest -DOUT=${_gen} -P ${_web_dir}/embed.cmake
  DEPENDS ${_deps} ${CMAKE_CURRENT_BINARY_DIR}/web_assets.manifest
  COMMENT "Embedding the web pages and libraries" VERBATIM)
target_sources(mx_server PRIVATE ${_gen})
