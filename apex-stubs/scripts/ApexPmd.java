// Runs PMD 7's Apex rules of four categories over the project's Apex sources,
// through PMD's Java API (net.sourceforge.pmd.PmdAnalysis), and applies the
// project's justified suppression list. Started by check.sh with Java 17's
// source-file mode (JEP 330) and the jars that the npm package
// @salesforce/code-analyzer-pmd-engine ships in dist/java-lib/ (pmd-core,
// pmd-apex 7.x and their dependencies): no build step, no download.
//
//   java -cp 'node_modules/@salesforce/code-analyzer-pmd-engine/dist/java-lib/*' \
//     scripts/ApexPmd.java pmd-suppressions.txt force-app example-app
//
// Rule sets (PMD's "category/apex/<name>.xml", the PMD Apex rule index):
// security, errorprone, bestpractices, performance.
//
// The suppression file has one entry a line: `<Rule> <path or *> <reason>`,
// where path is a source file relative to the working directory (or * for
// every file), and reason is at least 20 characters of prose; `#` starts a
// comment line. It fails (exit 1), listing every cause, when:
//   - any security or errorprone rule reports a violation (these cannot be
//     suppressed: an entry naming such a rule is itself an error);
//   - any other violation matches no entry;
//   - an entry matches no violation (a stale justification) or names a rule
//     that is not in the four rule sets;
//   - a source file relies on an in-code suppression (@SuppressWarnings('PMD')
//     or a NOPMD comment): every suppression is in the one file, with a reason;
//   - PMD reports a processing or configuration error.
// It exits 2 on bad usage or an unreadable suppression file.
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import net.sourceforge.pmd.PMDConfiguration;
import net.sourceforge.pmd.PmdAnalysis;
import net.sourceforge.pmd.lang.Language;
import net.sourceforge.pmd.lang.rule.Rule;
import net.sourceforge.pmd.lang.rule.RuleSet;
import net.sourceforge.pmd.lang.rule.RuleSetLoader;
import net.sourceforge.pmd.reporting.Report;
import net.sourceforge.pmd.reporting.RuleViolation;

public class ApexPmd {
  /** The rule-set categories run, in report order. */
  static final List<String> CATEGORIES = List.of("security", "errorprone", "bestpractices", "performance");
  /** Categories whose violations must be zero: no suppression allowed. */
  static final List<String> STRICT = List.of("security", "errorprone");
  /** Shortest accepted reason, characters: a reason, not a placeholder. */
  static final int MIN_REASON = 20;

  /** One line of the suppression file. */
  record Suppression(String rule, String path, String reason, int line) {
    boolean matches(String ruleName, String file) {
      return rule.equals(ruleName) && (path.equals("*") || path.equals(file));
    }
  }

  public static void main(String[] args) throws IOException {
    if (args.length < 2) {
      System.err.println("usage: ApexPmd SUPPRESSIONS DIR...");
      System.exit(2);
    }
    Path cwd = Path.of("").toAbsolutePath();
    List<String> problems = new ArrayList<>();
    List<Suppression> suppressions = readSuppressions(Path.of(args[0]), problems);
    if (suppressions == null) System.exit(2);

    PMDConfiguration config = new PMDConfiguration();
    config.setThreads(1);
    config.setIgnoreIncrementalAnalysis(true);
    config.setShowSuppressedViolations(true);

    Map<String, String> categoryOfRule = new LinkedHashMap<>();
    List<RuleSet> ruleSets = new ArrayList<>();
    RuleSetLoader loader = RuleSetLoader.fromPmdConfig(config);
    for (String category : CATEGORIES) {
      RuleSet set = loader.loadFromResource("category/apex/" + category + ".xml");
      for (Rule rule : set.getRules()) categoryOfRule.put(rule.getName(), category);
      ruleSets.add(set);
    }

    for (Suppression s : suppressions) {
      String category = categoryOfRule.get(s.rule());
      if (category == null) {
        problems.add(args[0] + ":" + s.line() + ": rule " + s.rule() + " is not in " + CATEGORIES);
      } else if (STRICT.contains(category)) {
        problems.add(args[0] + ":" + s.line() + ": rule " + s.rule() + " is a " + category
            + " rule; its violations must be fixed, not suppressed");
      }
    }

    Report report;
    int files;
    try (PmdAnalysis pmd = PmdAnalysis.create(config)) {
      pmd.addRuleSets(ruleSets);
      Language apex = config.getLanguageRegistry().getLanguageById("apex");
      for (int i = 1; i < args.length; i++) {
        try (Stream<Path> walk = Files.walk(Path.of(args[i]))) {
          for (Path p : walk.sorted().toList()) {
            String name = p.getFileName().toString();
            if (name.endsWith(".cls") || name.endsWith(".trigger")) pmd.files().addFile(p, apex);
          }
        }
      }
      files = pmd.files().getCollectedFiles().size();
      report = pmd.performAnalysisAndCollectReport();
    }
    if (files == 0) problems.add("no Apex files found under the given directories");

    for (Report.ProcessingError e : report.getProcessingErrors()) {
      problems.add(rel(cwd, e.getFileId().getAbsolutePath()) + ": PMD processing error: " + e.getMsg());
    }
    for (Report.ConfigurationError e : report.getConfigurationErrors()) {
      problems.add("PMD configuration error in rule " + e.rule().getName() + ": " + e.issue());
    }
    for (Report.SuppressedViolation sv : report.getSuppressedViolations()) {
      RuleViolation v = sv.getRuleViolation();
      problems.add(where(cwd, v) + ": in-code suppression of " + v.getRule().getName()
          + " (move it to " + args[0] + " with a reason)");
    }

    Map<String, int[]> counts = new TreeMap<>(); // category -> {violations, suppressed}
    for (String c : CATEGORIES) counts.put(c, new int[2]);
    int[] used = new int[suppressions.size()];
    List<String> listed = new ArrayList<>();
    for (RuleViolation v : report.getViolations()) {
      String rule = v.getRule().getName();
      String category = categoryOfRule.getOrDefault(rule, "?");
      String file = rel(cwd, v.getFileId().getAbsolutePath());
      counts.computeIfAbsent(category, k -> new int[2])[0]++;
      int match = -1;
      for (int i = 0; i < suppressions.size() && match < 0; i++) {
        if (suppressions.get(i).matches(rule, file)) match = i;
      }
      String line = where(cwd, v) + ": " + rule + " (" + category + ") " + v.getDescription();
      if (match >= 0 && !STRICT.contains(category)) {
        used[match]++;
        counts.get(category)[1]++;
      } else {
        listed.add("  VIOLATION " + line);
        problems.add(line);
      }
    }
    for (int i = 0; i < suppressions.size(); i++) {
      Suppression s = suppressions.get(i);
      if (used[i] == 0 && categoryOfRule.containsKey(s.rule()) && !STRICT.contains(categoryOfRule.get(s.rule()))) {
        problems.add(args[0] + ":" + s.line() + ": stale suppression: " + s.rule() + " " + s.path()
            + " matches no violation (remove it)");
      }
    }

    listed.sort(null);
    listed.forEach(System.out::println);
    for (int i = 0; i < suppressions.size(); i++) {
      if (used[i] > 0) {
        Suppression s = suppressions.get(i);
        System.out.println("  suppressed " + used[i] + " x " + s.rule() + " in " + s.path()
            + " (" + args[0] + ":" + s.line() + ")");
      }
    }
    StringBuilder summary = new StringBuilder("pmd: " + files + " files, " + categoryOfRule.size() + " rules;");
    for (String c : CATEGORIES) {
      int[] n = counts.get(c);
      summary.append(' ').append(c).append(' ').append(n[0]);
      if (n[1] > 0) summary.append(" (").append(n[1]).append(" suppressed)");
      summary.append(c.equals(CATEGORIES.get(CATEGORIES.size() - 1)) ? "" : ",");
    }
    System.out.println(summary);
    for (String p : problems) System.err.println("pmd: " + p);
    if (!problems.isEmpty()) {
      System.err.println("pmd: " + problems.size() + " problem(s)");
      System.exit(1);
    }
  }

  /** Parses the suppression file; null (after printing why) when it cannot be read. */
  static List<Suppression> readSuppressions(Path file, List<String> problems) {
    List<String> lines;
    try {
      lines = Files.readAllLines(file);
    } catch (IOException e) {
      System.err.println("pmd: cannot read " + file + ": " + e.getMessage());
      return null;
    }
    List<Suppression> out = new ArrayList<>();
    for (int i = 0; i < lines.size(); i++) {
      String text = lines.get(i).strip();
      if (text.isEmpty() || text.startsWith("#")) continue;
      String[] parts = text.split("\\s+", 3);
      if (parts.length < 3 || parts[2].strip().length() < MIN_REASON) {
        problems.add(file + ":" + (i + 1) + ": want `<Rule> <path or *> <reason of at least "
            + MIN_REASON + " characters>`");
        continue;
      }
      if (!parts[1].equals("*") && !Files.isRegularFile(Path.of(parts[1]))) {
        problems.add(file + ":" + (i + 1) + ": no such file " + parts[1]);
      }
      out.add(new Suppression(parts[0], parts[1], parts[2].strip(), i + 1));
    }
    return out;
  }

  static String where(Path cwd, RuleViolation v) {
    return rel(cwd, v.getFileId().getAbsolutePath()) + ":" + v.getBeginLine();
  }

  static String rel(Path cwd, String absolute) {
    Path p = Path.of(absolute);
    return p.startsWith(cwd) ? cwd.relativize(p).toString() : absolute;
  }
}
