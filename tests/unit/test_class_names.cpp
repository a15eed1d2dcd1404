// The class-name rule of common/class_names.h, the JSON writer over names of any bytes
// (common/json.h), and the options that must name a class (svm-fit --class-weight).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/class_names.h"
#include "common/error.h"
#include "common/json.h"
#include "kernels/svm/eval_file.h"
#include "kernels/svm/metrics.h"
#include "kernels/svm/train.h"

namespace {

// The message of the runtime_error that checked_class_names throws, "" when it does not.
std::string refusal(const std::vector<std::string>& names) {
  try {
    cae::checked_class_names(names, "d.h5");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ClassNames, Latin1BytesBecomeTheirCodePoints) {
  EXPECT_EQ(cae::utf8_or_latin1("caf\xe9"), "caf\xc3\xa9");                 // é
  EXPECT_EQ(cae::utf8_or_latin1("\xff\x80"), "\xc3\xbf\xc2\x80");           // ÿ, U+0080
  EXPECT_EQ(cae::utf8_or_latin1("na\xc3\xafve \xe2\x82\xac"), "na\xc3\xafve \xe2\x82\xac");  // valid: kept
  EXPECT_EQ(cae::utf8_or_latin1("\xc3"), "\xc3\x83");                       // a sequence cut short
  EXPECT_EQ(cae::utf8_or_latin1("\xc0\xaf"), "\xc3\x80\xc2\xaf");           // overlong '/'
  EXPECT_EQ(cae::utf8_or_latin1("\xed\xa0\x80"), "\xc3\xad\xc2\xa0\xc2\x80");  // a surrogate
  // Every pair of bytes before a Latin-1 byte comes back valid UTF-8 (nlohmann's dump with
  // its default handler throws on anything else), ASCII unchanged.
  for (int a = 1; a < 256; ++a)
    for (int b = 1; b < 256; ++b) {
      const std::string held = cae::utf8_or_latin1({char(a), char(b), char(0xA9)});
      ASSERT_NO_THROW(nlohmann::json(held).dump()) << a << " " << b;
      if (a < 0x80) {
        ASSERT_EQ(held[0], char(a));
      }
    }
  EXPECT_EQ(cae::utf8_or_latin1("cat dog"), "cat dog");
}

TEST(ClassNames, CheckedNamesAreUtf8AndDistinct) {
  const std::vector<std::string> held = cae::checked_class_names({"caf\xe9", "dog", "\xe7\x8c\xab"}, "d.h5");
  EXPECT_EQ(held, (std::vector<std::string>{"caf\xc3\xa9", "dog", "\xe7\x8c\xab"}));
  EXPECT_EQ(cae::checked_class_names({std::string(255, 'a')}, "d.h5").size(), 1u);
}

TEST(ClassNames, RefusedNamesAreNamedWithTheFile) {
  const std::string nul = refusal({"cat", std::string("a\0b", 3)});
  EXPECT_NE(nul.find("d.h5: class 1"), std::string::npos) << nul;
  EXPECT_NE(nul.find("NUL"), std::string::npos) << nul;
  EXPECT_NE(refusal({"cat", ""}).find("d.h5: class 1 has an empty name"), std::string::npos);
  EXPECT_NE(refusal({std::string(256, 'a')}).find("at most 255 bytes"), std::string::npos);
  // 128 Latin-1 bytes are 256 bytes of UTF-8.
  EXPECT_NE(refusal({std::string(128, '\xe9')}).find("at most 255 bytes"), std::string::npos);
  const std::string twice = refusal({"cat", "dog", "cat"});
  EXPECT_NE(twice.find("class 0 ('cat') and class 2 ('cat') are one class name"), std::string::npos) << twice;
  // A Latin-1 folder and its UTF-8 twin: both named as they were, the first escaped.
  const std::string twins = refusal({"caf\xe9", "caf\xc3\xa9"});
  EXPECT_NE(twins.find("\"'caf\\xE9'\""), std::string::npos) << twins;
  EXPECT_NE(twins.find("'caf\xc3\xa9'"), std::string::npos) << twins;
  EXPECT_NE(twins.find("Latin-1"), std::string::npos) << twins;
  // Two names that differ only after a NUL are refused, not made one.
  EXPECT_NE(refusal({std::string("a\0b", 3), std::string("a\0c", 3)}).find("NUL"), std::string::npos);
}

TEST(JsonWriter, BytesThatAreNotUtf8StillMakeValidJson) {
  const std::string raw = "caf\xe9\n\x1b[31m\"\\";
  const std::string text = cae::JsonObject()
                               .add("name", raw)
                               .add("names", std::vector<std::string>{raw, "ok"})
                               .add("rows", std::vector<std::vector<int64_t>>{{1, 2}, {3, 4}})
                               .str();
  const nlohmann::json parsed = nlohmann::json::parse(text);  // strict: throws on invalid UTF-8
  EXPECT_EQ(parsed["name"].get<std::string>(), "caf\xef\xbf\xbd\n\x1b[31m\"\\");  // U+FFFD
  EXPECT_EQ(parsed["names"][1].get<std::string>(), "ok");
  EXPECT_EQ(parsed["rows"][1][0].get<int>(), 3);
  for (char c : text) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << text;
  EXPECT_EQ(cae::json_escape("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
}

TEST(JsonWriter, NestedObjectsArraysAndRawValues) {
  cae::JsonObject inner;
  inner.add("2", 0.5).add("5", 0.75);
  const std::string text = cae::JsonObject()
                               .add("top", inner)
                               .add("scores", std::vector<cae::JsonObject>{inner, cae::JsonObject().add("x", int64_t{7})})
                               .add_raw("phases", "{\"read\":1.5,\"total\":2}")
                               .add("inf", 1.0 / 0.0)
                               .add("values", std::vector<double>{2.0, -0.0, 0.1, 1e300})
                               .str();
  EXPECT_EQ(text,
            "{\"top\":{\"2\":0.5,\"5\":0.75},\"scores\":[{\"2\":0.5,\"5\":0.75},{\"x\":7}],"
            "\"phases\":{\"read\":1.5,\"total\":2},\"inf\":null,\"values\":[2,-0.0,0.1,1e+300]}");
  EXPECT_THROW(cae::JsonObject().add_raw("x", "{not json"), std::invalid_argument);
}

TEST(SvmClassWeights, ALabelOrNameOfNoClassIsRefusedNamingTheClasses) {
  const std::vector<int32_t> y = {0, 0, 1, 1, 2, 2};
  const std::vector<std::string> names = {"cat", "dog", "caf\xc3\xa9"};
  for (const char* bad : {"7:2", "3:2", "emu:2", "dog:2,9:1"}) {
    try {
      svm::resolve_class_weights(bad, y.data(), 6, names);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const cae::UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("is no class name or label"), std::string::npos) << what;
      EXPECT_NE(what.find("0 cat, 1 dog, 2 caf\xc3\xa9"), std::string::npos) << what;
    }
  }
  EXPECT_EQ(svm::resolve_class_weights("2:3", y.data(), 6, names), (svm::ClassWeights{{2, 3.0}}));
  // A name typed in Latin-1 is the class whose name it is.
  EXPECT_EQ(svm::resolve_class_weights("caf\xe9:3", y.data(), 6, names), (svm::ClassWeights{{2, 3.0}}));
}

TEST(SvmKind, NuGivenAsNanIsRefusedNotTakenAsUnset) {
  svm::TrainPlan plan = svm::plan_from_options("10", "scale", "rbf", 0, 1e-3);
  EXPECT_THROW(svm::plan_kind(plan, "one-class", std::nan(""), "none"), cae::UsageError);
  EXPECT_THROW(svm::plan_kind(plan, "c-svc", std::nan(""), "none"), cae::UsageError);
  svm::plan_kind(plan, "one-class", std::nullopt, "none");
  EXPECT_EQ(plan.params.nu, 0.5);
  svm::plan_kind(plan, "one-class", 0.25, "none");
  EXPECT_EQ(plan.params.nu, 0.25);
}

TEST(EvalTable, ClassNamesAreEscapedAndCutOnCharacters) {
  svm::Evaluation e;
  e.K = 3;
  e.class_names = {"new\nline", "esc\x1b[2J", std::string(8, 'a') + "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"};
  e.confusion = {3, 1, 0, 0, 2, 2, 1, 0, 5};
  e.report = svm::classification_report(e.confusion, e.K);
  const std::string table = svm::eval_table(e);
  EXPECT_EQ(table.find('\x1b'), std::string::npos) << table;
  // A header, the columns' names, a line per class, the averages: no name adds a line.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 6) << table;
  EXPECT_NE(table.find("\nnew\\nline    "), std::string::npos) << table;
  EXPECT_NE(table.find("\nesc\\x1B[2J "), std::string::npos) << table;
  // 12 characters of "aaaaaaaaéééééé": four é kept whole (two bytes each), none split.
  EXPECT_NE(table.find("\naaaaaaaa\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9 "), std::string::npos) << table;
  EXPECT_NO_THROW(nlohmann::json(table).dump());  // valid UTF-8 throughout
}
