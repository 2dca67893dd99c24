#include "core/cli/options_help.h"

#include <fmt/format.h>

#include <ostream>

#include "core/cli/options_registry.h"
#include "core/cli/version.h"

namespace lseq {

namespace {

const char* app_purpose(App app) {
  switch (app) {
    case App::train: return "trains Transformer translation models";
    case App::translate: return "translates text with a model trained by lstrain";
    case App::score: return "scores sentence pairs or rescores n-best lists with a model trained by lstrain";
    case App::eval: return "corpus BLEU and chrF of translations against references, as sacreBLEU computes them";
    case App::bench: return "the options every benchmark under bench/ reads (each uses those it needs)";
  }
  return "";
}

std::string value_placeholder(const OptionSpec& spec) {
  if (!spec.schedule_units.empty()) return "N[" + spec.schedule_units + "]";
  switch (spec.type) {
    case OptionType::boolean: return "";
    case OptionType::integer: return "INT";
    case OptionType::floating: return "NUM";
    case OptionType::string: return "TEXT";
    case OptionType::strings: return "TEXT ...";
    case OptionType::ints: return "INT ...";
    case OptionType::floats: return "NUM ...";
  }
  return "";
}

// " (default: 4096)"; nothing for flags and options without a default.
std::string default_text(const OptionSpec& spec, App app) {
  DefaultTokens tokens = spec.default_for(app);
  if (!tokens || spec.type == OptionType::boolean) return "";
  if (tokens->empty()) return spec.is_list() ? "" : " (default: \"\")";
  std::string joined;
  for (const auto& token : *tokens) joined += (joined.empty() ? "" : " ") + token;
  if (joined.empty()) joined = "\"\"";
  return " (default: " + joined + ")";
}

std::string title(OptionGroup group, App app) {
  if (group == OptionGroup::translation && app == App::score) return "Scoring options";
  return group_title(group);
}

}  // namespace

void print_help(App app, std::ostream& out) {
  constexpr size_t kColumn = 36;
  out << fmt::format("{}: {}\n{}\n\n", app_name(app), app_purpose(app), version_string());
  out << fmt::format("Usage: {} [options]\n", app_name(app));
  out << "Options also come from YAML files with the same names (--config a.yaml b.yaml, merged in order);\n"
         "the command line wins. --dump-config prints the merged result.\n";
  for (OptionGroup group : {OptionGroup::general, OptionGroup::model, OptionGroup::training, OptionGroup::validation,
                            OptionGroup::translation, OptionGroup::evaluation, OptionGroup::benchmark}) {
    bool header = false;
    for (const auto& spec : option_registry()) {
      if (!spec.accepted_by(app) || spec.group_for(app) != group) continue;
      if (!header) out << "\n" << title(group, app) << ":\n", header = true;
      std::string left = spec.short_flag ? fmt::format("  -{}, --{}", spec.short_flag, spec.name)
                                         : fmt::format("      --{}", spec.name);
      std::string placeholder = value_placeholder(spec);
      if (!placeholder.empty()) left += " " + placeholder;
      std::string text = spec.help_for(app) + default_text(spec, app);
      if (!spec.marian_differs.empty() && (app == App::train || app == App::translate || app == App::score))
        text += " [Marian: " + spec.marian_differs + "]";
      const auto whole = [](const std::vector<OptionSpec::ValueNote>& notes) {
        return !notes.empty() && notes.front().value.empty() ? notes.front().text : std::string();
      };
      if (!whole(spec.refused).empty()) text += " [refused: " + whole(spec.refused) + "]";
      if (!whole(spec.ignored).empty()) text += " [no effect here: " + whole(spec.ignored) + "]";
      if (left.size() + 2 > kColumn) {
        out << left << "\n" << std::string(kColumn, ' ') << text << "\n";
      } else {
        out << left << std::string(kColumn - left.size(), ' ') << text << "\n";
      }
    }
  }
}

}  // namespace lseq
