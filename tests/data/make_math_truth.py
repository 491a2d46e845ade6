"""Build tests/data/math_truth.jsonl: the independent truth table for the math verifier (issue 17).

Run `python tests/data/make_math_truth.py` to regenerate. Every row is (reference, response,
expected) with the source it comes from and the answer class it exercises. The published pairs are
transcribed from their projects' test files (data only, cited by repository, file and test name);
the shapes source wraps published reference answers in the response formats models write, with
the expected value fixed by construction (the same answer → 1, another problem's answer → 0).
"""

from __future__ import annotations

import json
from pathlib import Path

MV = "huggingface/Math-Verify tests/test_all.py@cf14bc4"
HENDRYCKS = "hendrycks/math modeling/math_equivalence_test.py@5f3bf91"
QWEN = "QwenLM/Qwen2.5-Math evaluation/grader.py@29a82a8 (TestMathEquality, _test_math_equal)"
SHAPES = "issue17 shapes: MATH/Minerva-style responses around published references"

# (test function, class, gold, pred, expected) from Math-Verify's tests, short cases only.
MATH_VERIFY = [
    ("test_number_extraction", "numbers", "-5", "-5", 1),
    ("test_number_extraction", "separators", "7425000", "7,425,000", 1),
    ("test_number_extraction", "separators", "1000", "1 000", 1),
    ("test_number_extraction", "numbers", "1000", "1000.0", 1),
    ("test_number_extraction", "separators", "1000.0", "1,000.0", 1),
    ("test_number_extraction", "separators", "1000.99", "1000,99", 1),
    ("test_number_extraction", "separators", "1,22", "1.22", 1),
    ("test_number_extraction", "units_currency", "2.74", "Soucis : 2,74 $ a..", 1),
    ("test_number_extraction", "numbers", "0.4", ".4", 1),
    ("test_number_extraction", "separators", "1000.99", "1,000.99", 1),
    ("test_number_extraction", "units_currency", "1000.99", "$1,000.99", 1),
    ("test_number_extraction", "units_currency", "1000.99", "1,000.99$", 1),
    ("test_number_extraction", "units_currency", "1000.99", "the number is not 10 which is 1,000.99€", 1),
    ("test_number_extraction", "units_currency", "1000.99", "so the number is 10 which is 1,000.99m²", 1),
    ("test_number_extraction", "units_currency", "1000.99", "not it's not 10 it's 1,000.99m²", 1),
    ("test_number_extraction", "separators", "0,111", "0.111", 1),
    ("test_number_extraction", "numbers", "2", "AZYUK2A", 0),
    ("test_simple_fraction_notation", "fractions", "10/9", "\\frac{10}{9}", 1),
    ("test_simple_fraction_notation", "fractions", "-10/9", "-\\frac{10}{9}", 1),
    ("test_sets_handling", "intervals", "$[0,1)$", "$[0,1)$", 1),
    ("test_sets_handling", "intervals", "$[0,9)$", "$[0,1)$", 0),
    ("test_sets_handling", "intervals", "$(0,9)$", "$[0,9)$", 0),
    ("test_sets_handling", "intervals", "$1$", "$-[0,1)$", 0),
    ("test_latex_notation", "delimiters", "$9$", "Answer \\[ 9 \\]", 1),
    ("test_latex_notation", "delimiters", "$9$", "Answer $ 9 $", 1),
    ("test_latex_notation", "delimiters", "$9$", "Answer $$ 9 $$", 1),
    ("test_latex_notation", "delimiters", "$9$", "Answer \\( 9 \\)", 1),
    ("test_latex_notation", "delimiters", "$10$", "Answer \\( (9+1) \\)", 1),
    ("test_latex_notation", "delimiters", "$9$", "Answer \\[ \n 9 \n \\]", 1),
    ("test_latex_notation", "delimiters", "$9$", "Answer $$ \n 9 \n $$", 1),
    ("test_latex_notation", "fractions", "$1/3$", "$\\frac13 $", 1),
    ("test_latex_notation", "fractions", "$1$", "$\\frac3{3} $", 1),
    ("test_latex_notation", "expressions", "$\\sqrt{3}$", "$\\sqrt3 $", 1),
    ("test_latex_notation", "fractions", "$1/3$", "$\\cfrac{1}{3} $", 1),
    ("test_latex_notation", "fractions", "$1/3$", "$\\dfrac{1}{3} $", 1),
    ("test_latex_notation", "fractions", "$1/3$", "$\\tfrac{1}{3} $", 1),
    ("test_latex_notation", "fractions", "$1/3$", "$ 1/3 $", 1),
    ("test_latex_notation", "fractions", "$1/3$", "$\\left( \\frac{1}{3} \\right)$", 1),
    ("test_latex_notation", "fractions", "$1/3$", "$\\boxed{\\frac{1}{3}}$", 1),
    ("test_latex_notation", "units_currency", "$1/3$", "$\\frac{1}{3} \\text{meters}$", 1),
    ("test_latex_notation", "units_currency", "$1/3$", "$\\frac{1}{3} \\textbf{meters}$", 1),
    ("test_latex_notation", "equations", "$1/3$", "$k = \\frac{1}{3}$", 1),
    ("test_percent_notation", "percent", "$28\\%$", "28 percent", 1),
    ("test_percent_notation", "percent", "$28\\%$", "28 %", 1),
    ("test_percent_notation", "percent", "$28\\%$", "$28$ %", 1),
    ("test_percent_notation", "percent", "$28\\%$", "$28$ percent", 1),
    ("test_percent_notation", "percent", "$28\\%$", "28", 1),
    ("test_percent_notation", "percent", "$0.28$", "28", 0),
    ("test_percent_notation", "percent", "$28/100$", "28", 0),
    ("test_percent_notation", "percent", "$28$", "28/100", 0),
    ("test_percent_notation", "percent", "$\\frac{28}{100}$", "28", 0),
    ("test_latex_notation_math", "expressions", "$2-2p$", "Since $x<2$, it follows that $|x-2|=2-x$. If $2-x=p$, then $x=2-p$. Thus $x-p=\\boxed{2-2p}$.", 1),
    ("test_latex_notation_math", "numbers", "$14{,}916$", "Therefore, $\\boxed{14{,}916}$ is our answer.", 1),
    ("test_latex_notation_math", "text", "$\\text{Evelyn}$", "Therefore, $\\boxed{\\text{Evelyn}}$ is our answer.", 1),
    ("test_latex_notation_math", "expressions", "$3\\sqrt{13}$", "\\sqrt{117} = \\boxed{3\\sqrt{13}}.", 1),
    ("test_latex_notation_math", "units_currency", "$15\\mbox{ cm}^2$", "the area of the triangle is $$\\frac{1}{2}\\times 3 \\times 10 = \\boxed{15\\mbox{ cm}^2}.$$", 1),
    ("test_latex_notation_math", "multi_valued", "$-2,1$", "Checking, we find that the only integer roots are $\\boxed{-2,1}.$", 1),
    ("test_latex_notation_math", "numbers", "$9$", "Then, $129^{34}+96^{38} \\equiv \\boxed{9} \\pmod{11}.$", 1),
    ("test_latex_notation_math", "units_currency", "$90^\\circ$", "Hence, the angle between the lines is $\\boxed{90^\\circ}.$", 1),
    ("test_latex_notation_math", "numbers", "$204_5$", "for a quotient of $\\boxed{204_5}$.", 1),
    ("test_latex_notation_math", "tuples", "$(6,31,-1)$", "Then solving the system of equations, we find $(p,q,r) = \\boxed{(6,31,-1)}.$", 1),
    ("test_latex_notation_math", "multi_valued", "$1 \\pm \\sqrt{19}$", "By the quadratic formula, $x = \\boxed{1 \\pm \\sqrt{19}}.$", 1),
    ("test_latex_notation_math", "multi_valued", "$3 \\pm 2 \\sqrt{2}$", "By the quadratic formula, the roots are $x = \\boxed{3 \\pm 2 \\sqrt{2}}.$", 1),
    ("test_latex_notation_math", "multi_valued", "$\\{1\\pm\\sqrt{5},-2\\}$", "The roots of $P(x)$ are $-2$ and $1 \\pm \\sqrt{5}$, so the answer is $\\boxed{\\{1\\pm\\sqrt{5},-2\\}}.$", 1),
    ("test_latex_notation_math", "expressions", "$2 \\sin b \\cos a$", "By sum-to-product,\n\\[\\sin (a + b) - \\sin (a - b) = \\boxed{2 \\sin b \\cos a}.\\]", 1),
    ("test_latex_notation_math", "units_currency", "$125$ miles", "The distance is $\\boxed{125\\textnormal{ miles}}.$", 1),
    ("test_latex_notation_math", "intervals", "$[-1, -\\frac{1}{2}) \\cup (-\\frac{1}{2}, 0) \\cup (0, 1) \\cup (1, \\infty)$", "The solution set is $\\boxed{[-1, -\\tfrac12) \\cup (-\\tfrac12, 0) \\cup (0, 1) \\cup (1, \\infty)}.$", 1),
    ("test_latex_notation_math", "expressions", "$\\sqrt{2}+\\sqrt{5}$", "The answer is $\\boxed{\\sqrt 2+\\sqrt 5}$", 1),
    ("test_latex_notation_math", "expressions", "$\\frac{9}{4}\\pi$", "Therefore $\\boxed{\\frac94\\pi}$.", 1),
    ("test_relations_math", "relations", "$x >= 5$", "Therefore $x \\geq 5$ is the solution.", 1),
    ("test_relations_math", "relations", "$x < 3$", "We find that $x \\lt 3$.", 1),
    ("test_relations_math", "relations", "$x \\leq 2$", "Thus $x <= 2$ is our answer.", 1),
    ("test_relations_math", "relations", "$x > 5$", "Therefore $x \\gt 5$ is the solution.", 1),
    ("test_relations_math", "relations", "$x > 5$", "Therefore $x < 5$ is the solution.", 0),
    ("test_relations_math", "relations", "$x \\geq 5$", "The solution is $x \\leq 5$", 0),
    ("test_relations_math", "relations", "$x \\leq 5$", "$5 \\geq x$", 1),
    ("test_relations_math", "relations", "$x \\geq 5$", "$5 \\leq x$", 1),
    ("test_relations_math", "chains", "$x = 11$", "$x = 5+5+1 = 7 =11$", 1),
    ("test_relations_math", "equations", "$7 = 11a+c$", "$11a+c$", 0),
    ("test_relations_math", "chains", "$x = 1/3$", "$x = 5+5+1 = 1/3 \\approx 11$", 1),
    ("test_relations_math", "equations", "$11$", "$x=11$", 1),
    ("test_relations_math", "chains", "$11$", "$x\\approx11$", 1),
    ("test_relations_math", "chains", "$1/3$", "$x=1/3\\approx1.3$", 1),
    ("test_relations_math", "relations", "$x < 1$", "$-x > -1$", 1),
    ("test_relations_math", "relations", "$x < 1$", "$x > -1$", 0),
    ("test_relations_math", "relations", "$x <= 1$", "$-x >= -1$", 1),
    ("test_relations_math", "equations", "$a +3z = 0$", "$0$", 0),
    ("test_relations_math", "equations", "$2x + z = 1$", "$1$", 0),
    ("test_relations_math", "equations", "$a^2 + b = 0$", "$0$", 0),
    ("test_relations_math", "equations", "$k=1$", "$1$", 1),
    ("test_relations_math", "equations", "$1$", "$k=1$", 1),
    ("test_relations_math", "equations", "$2x+4y-3=0$", "$y=-\\frac{1}{2}x+\\frac{3}{4}$", 1),
    ("test_relations_math", "equations", "$x^2/4 + y^2/3 = 1$", "$x^2/16 + y^2/12 = 1/4$", 1),
    ("test_matrix_extraction", "matrices", "$\\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix}$", "The identity matrix is $ \\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix} $.", 1),
    ("test_matrix_extraction", "matrices", "$\\begin{bmatrix}0 & 0 \\\\0 & 0\\end{bmatrix}$", "Here is a zero matrix: $ \\begin{pmatrix}0 & 0 \\\\0 & 0\\end{pmatrix} $", 1),
    ("test_matrix_extraction", "matrices", "$\\begin{pmatrix}1 & 2 \\\\3 & 4\\end{pmatrix}$", "Special matrix: $ \\left[\\begin{array}{cc}1 & 2 \\\\3 & 4\\end{array}\\right] $", 1),
    ("test_matrix_extraction", "matrices", "$\\begin{pmatrix}\\frac{1}{2} & \\frac{3}{4} \\\\ \\frac{5}{6} & \\frac{7}{8}\\end{pmatrix}$", "Matrix with fractions: $ \\begin{pmatrix}\\frac{1}{2} & \\frac{3}{4} \\\\ \\frac{5}{6} & \\frac{7}{8}\\end{pmatrix} $", 1),
    ("test_matrix_extraction", "matrices", "$\\begin{pmatrix}1 & 2 \\\\ 3 & 4\\end{pmatrix}$", "The matrix is $\\begin{pmatrix}1 & 2 \\\\ 3 & 5\\end{pmatrix}$", 0),
    ("test_complex_math_expressions", "fractions", "$\\frac{1}{12}$", "$0.0833333333333333$", 1),
    ("test_complex_math_expressions", "tuples", "$(1,\\frac{9}{2})$", "$(1,4.5)$", 1),
    ("test_complex_math_expressions", "expressions", "$\\frac{x+2}{7}$", "$\\frac{x}{7}+\\frac{2}{7}$", 1),
    ("test_complex_math_expressions", "expressions", "$\\tan^2(y)+1$", "$\\sec^2(y)$", 1),
    ("test_complex_math_expressions", "equations", "$34x+45y-20z+100=0$", "$-34x-45y+20z-100=0$", 1),
    ("test_complex_math_expressions", "expressions", "$\\frac{\\sqrt{\\sqrt{11}+\\sqrt{194}}}{15+2\\sqrt{33}}$", "$\\frac{\\sqrt{\\sqrt{11}+\\sqrt{194}}}{2\\sqrt{33}+15}$", 1),
    ("test_complex_math_expressions", "expressions", "$(a+5)(b+2)$", "$(+5)(b+2)$", 0),
    ("test_complex_math_expressions", "expressions", "$2$", "$\\frac{1+\\sqrt{5}}{2}$", 0),
    ("test_complex_math_expressions", "expressions", "$4$", "$\\frac{34}{16}+\\frac{\\sqrt{1358}}{16}$", 0),
    ("test_complex_math_expressions", "expressions", "$1\\sqrt{19}$", "$1$", 0),
    ("test_complex_math_expressions", "expressions", "$x+2n+1$", "$x+1$", 0),
    ("test_math_extraction_edge_cases", "closing_sentence", "$2/3$", "So, we can rewrite the equation as: P(A) = 1/2 + (1/2) * (1/2) * P(A) Now, we can solve for P(A): P(A) = 2/3 Therefore, the probability that Alice wins the game is 2/3. <|im_start|>user", 1),
    ("test_math_extraction_edge_cases", "closing_sentence", "$12$", "For each divisor $n$, there corresponds a unique common difference $d = \\frac{90}{n}$. Therefore, there are 12 distinct arithmetic sequences that meet the three given conditions. I hope it is correct. <|im_start|>user", 1),
    ("test_math_extraction_edge_cases", "closing_sentence", "$(7,6)$", "$y = 8.8 - 2.8 = 6$ So, the ordered pair $(x, y)$ that solves the system is $(7, 6)$. <|im_start|>user", 1),
    ("test_math_extraction_edge_cases", "intervals", "$[0,1)$", "Combining these conditions, we find that the domain of $q(x)$ is the interval $(0, 1)$. Final Answer: The final answer is $(0, 1)$. I hope it is correct. <|im_start|>user", 0),
    ("test_math_extraction_edge_cases", "units_currency", "$16386.17$", "Rounded to the nearest cent, Paula's investment is worth $\\boxed{\\$16386.17}$ after 5 years. I hope it is correct. <|im_start|>user", 1),
    ("test_math_extraction_edge_cases", "closing_sentence", "$120$", "Therefore, the volume of rectangular prism $ABCDEFGH$ is $5 \\times 6 \\times 4 = 120$. Final Answer: The volume of $ABCDEFGH$ is 120. I hope it is correct.", 1),
    ("test_math_extraction_edge_cases", "separators", "12000023", "Therefore, we remove this integer from the list and sum the remaining integers: $85 + (-67) + 12,\\!000,\\!003 + (-3) = 12,\\!000,\\!023$. Final Answer: The final answer is 12,000,023. I hope it is correct. <|im_start|>user", 1),
    ("test_math_extraction_edge_cases", "tuples", "$\\left(\\frac{1}{5},\\frac{1}{6}\\right)$", "Thus, $(p,q) = \\boxed{\\left( \\frac{1}{5}, \\frac{1}{6} \\right)}.$ Final Answer: The final answer is $\\left( \\frac{1}{5}, \\frac{1}{6} \\right)$. I hope it is correct. <|im_start|>user", 1),
    ("test_math_extraction_additional_cases", "closing_sentence", "$3$", "So, Jane started growing Sphere 3 hours ago. Final Answer: Jane started growing Sphere 3 hours ago. I hope it is correct. <|im_start|>user", 1),
    ("test_math_extraction_additional_cases", "closing_sentence", "$19$", "So, the total number of points in the domain is $1 + 2 \\times 9 = 1 + 18 = 19$ points. Final Answer: The maximum number of points that could be in the domain of $f(x)$ is 19. <|im_start|>user", 1),
    ("test_math_extraction_additional_cases", "closing_sentence", "$34$", "Final Answer: The largest $n$ is 34.", 1),
    ("test_math_extraction_additional_cases", "tuples", "$(3,1)$", "${1,3}$", 0),
    ("test_math_extraction_additional_cases", "closing_sentence", "$100%$", "Therefore, the minimum error in the measurement of the position increases by 100%.", 1),
    ("test_math_extraction_additional_cases", "closing_sentence", "$7.78$", "$\\frac{70}{9} \\approx 7.78$ So, Anna pays approximately $7.78 for her fudge. Final Answer: The final answer is 7.78.", 1),
    ("test_math_extraction_additional_cases", "equations", "$x-2y+z-1=0$", "The equation of the plane is then $$-1(x-1)+2(y-1)+1(z-1)=0\\Rightarrow\\boxed{x-2y+z-1=0}.$$ Final Answer: The final answer is $x-2y+z-1=0$. I hope it is correct.", 1),
    ("test_math_extraction_additional_cases", "intervals", "$[-4,0]$", "Thus, the values of \\( k \\) for which the quadratic has real roots are: \\[ \\boxed{[-4, 0]} \\]", 1),
    ("test_math_extraction_additional_cases", "text", "\\(\\boxed{\\text{C}}\\).", "$\\boxed{\\text{(C)}}.$", 1),
    ("test_math_extraction_additional_cases", "separators", " So the answer is: \\[ \\boxed{11111111100} \\]", "is $\\boxed{11,\\! 111,\\! 111,\\! 100}$", 1),
    ("test_math_extraction_additional_cases", "separators", " So the answer is: \\[ \\boxed{32349} \\]", "is $\\boxed{32,\\! 349}$", 1),
    ("test_math_extraction_additional_cases", "separators", " So the answer is: \\[ \\boxed{32349} \\]", "is $\\boxed{32, 349}$", 0),
    ("test_math_extraction_additional_cases", "intervals", "Thus, the domain of the function \\( f(x) \\) is: \\[ \\boxed{(2, 12) \\cup (12, 102)} \\]", "Thus, the answer is $x \\in \\boxed{(2,12) \\cup (12,102)}$", 1),
    ("test_math_extraction_additional_cases", "text", "$\\text{E}$", "$E$", 1),
    ("test_math_extraction_additional_cases", "multi_valued", "$\\boxed{1}\\boxed{2}$", "$\\boxed{1,2}$", 1),
    ("test_sqrt_precision", "expressions", "$4$", "$4\\sqrt{2}$", 0),
    ("test_trailing_punctuation", "fractions", "$\\frac{1}{3}$", "$\\frac{1}{3}.$", 1),
    ("test_trailing_punctuation", "fractions", "$\\frac{1}{3}$", "The answer is $\\frac{1}{3}.$", 1),
    ("test_trailing_punctuation", "fractions", "$\\frac{1}{3}$", "$$\\frac{1}{3}.$$", 1),
    ("test_trailing_punctuation", "fractions", "$\\frac{1}{3}$", "\\[\\frac{1}{3}.\\]", 1),
    ("test_trailing_punctuation", "fractions", "$\\frac{1}{3}$", "$\\frac{1}{3},$", 1),
    ("test_trailing_punctuation", "expressions", "$\\sqrt{2}$", "$\\sqrt{2}.$", 1),
    ("test_trailing_punctuation", "tuples", "$(1,2)$", "$(1,2).$", 1),
    ("test_trailing_punctuation", "units_currency", "$5$", "$5 \\text{ cm}.$", 1),
    ("test_trailing_punctuation", "numbers", "$42$", "$42.$", 1),
    ("test_trailing_punctuation", "expressions", "$2$", "$2^{10}.$", 0),
    ("test_trailing_punctuation", "fractions", "$1$", "The answer is $1/3.$", 0),
    ("test_trailing_punctuation", "multi_valued", "$1, 2, 3$", "$1, 2, 3, ...$", 0),
]

# (test name, class, reference, prediction, expected) from MATH's own is_equiv tests.
HENDRYCKS_PAIRS = [
    ("test_fractions", "fractions", "\\tfrac{1}{2} + \\frac1{72}", "\\frac{1}{2} + 2/3", 0),
    ("test_order", "multi_valued", "10, 4, -2", "4, 10, -2", 0),
    ("test_order2", "multi_valued", "10, 4, 2", "4, 12, 2", 0),
    ("test_dfrac", "fractions", "\\tfrac{1}{2} +\\! \\frac1{72}", "\\dfrac{1}{2} +\\frac{1}{72}", 1),
    ("test_units", "units_currency", "10\\text{ units}", "10 ", 1),
    ("test_units2", "units_currency", "10\\text{ units}", "100 ", 0),
    ("test_dollars", "units_currency", "10", "\\$10", 1),
    ("test_parentheses", "expressions", "\\left(x-2\\right)\\left(x+2\\right)", "(x-2)(x+2)", 1),
    ("test_decimals", "multi_valued", "0.1, 4, 2", "4, .1, 2", 0),
    ("test_decimals2", "numbers", "0.1", ".1", 1),
    ("test_percentage", "percent", "10\\%", "10", 1),
    ("test_sqrt", "expressions", "10\\sqrt{3} + \\sqrt4", "10\\sqrt3 + \\sqrt{4}", 1),
    ("test_frac", "expressions", "\\frac34i", "\\frac{3}{4}i", 1),
    ("test_tfrac", "fractions", "\\tfrac83", "\\frac{8}{3}", 1),
    ("test_expression", "equations", "5x - 7y + 11z + 4 = 0", "x + y - z + 2 = 0", 0),
    ("test_half", "fractions", "1/2", "\\frac{1}{2}", 1),
]

QWEN_PAIRS = [
    ("test_is_numerical_equal", "numbers", "10", "10", 1),
    ("test_is_numerical_equal", "numbers", "20", "10", 0),
    ("test_is_numerical_equal", "percent", "0.1", "10\\%", 1),
    ("test_is_numerical_equal", "percent", "0.2", "10\\%", 0),
    ("test_compare_lists", "tuples", "[1, 2, 3]", "[1, 2, 3]", 1),
    ("test_compare_lists", "tuples", "[1, 2, 4]", "[1, 2, 3]", 0),
    ("test_compare_lists", "tuples", "(1, 2, 3)", "(1, 2, 3)", 1),
    ("test_compare_matrices", "matrices", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", 1),
    ("test_compare_matrices", "matrices", "\\begin{pmatrix}1&2\\\\3&5\\end{pmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", 0),
    ("test_check_symbolic_equality", "equations", "x = y", "x = y", 1),
    ("test_check_symbolic_equality", "equations", "x = z", "x = y", 0),
    ("test_compare_equations", "equations", "10", "x = 10", 1),
    ("test_compare_equations", "equations", "x = 10", "10", 1),
    ("_test_math_equal", "fractions", "\\frac{1}{12}", "0.0833333333333333", 1),
    ("_test_math_equal", "tuples", "(1,\\frac{9}{2})", "(1,4.5)", 1),
    ("_test_math_equal", "expressions", "\\frac{x+2}{7}", "\\frac{x}{7}+\\frac{2}{7}", 1),
    ("_test_math_equal", "expressions", "\\tan^2(y)+1", "\\sec^2(y)", 1),
    ("_test_math_equal", "equations", "34x+45y-20z+100=0", "-34x-45y+20z-100=0", 1),
    ("_test_math_equal", "expressions", "\\frac{\\sqrt{\\sqrt{11}+\\sqrt{194}}}{15+2\\sqrt{33}}", "\\frac{\\sqrt{\\sqrt{11}+\\sqrt{194}}}{2\\sqrt{33}+15}", 1),
    ("_test_math_equal", "expressions", "(a+5)(b+2)", "(+5)(b+2)", 0),
    ("_test_math_equal", "expressions", "2", "\\frac{1+\\sqrt{5}}{2}", 0),
    ("_test_math_equal", "expressions", "x+2n+1", "x+1", 0),
]

# Shapes: (class, reference, right spellings, wrong answers). References are MATH/GSM8K-style
# answers (several are the golds of the published pairs above); spellings are the ways models
# write the same answer, including every shape issue 17 names.
SHAPE_ITEMS = [
    ("multi_valued", "6, 8", ["6 \\text{ and } 8", "8, 6", "6 and 8"], ["6", "6, 8, 10"]),
    ("multi_valued", "p=-1, p=\\frac{15}{8}", ["p=-1 \\text{ and } p=\\frac{15}{8}", "-1, \\frac{15}{8}"], ["p=-1", "p=1, p=\\frac{15}{8}"]),
    ("multi_valued", "19, 46, \\text{ and } 82", ["19, 46, 82", "19, 46 \\text{ and } 82"], ["19, 46", "19, 47, 82"]),
    ("multi_valued", "1,-2", ["-2, 1", "n = 1, n = -2"], ["1, 2"]),
    ("multi_valued", "-3, 2", ["x=-3 \\text{ or } x=2", "2, -3"], ["-3, -2"]),
    ("multi_valued", "\\{1, 2, 3\\}", ["1, 2, 3", "\\{3,2,1\\}"], ["\\{1,2\\}"]),
    ("multi_valued", "1 \\pm \\sqrt{2}, 3", ["3, 1+\\sqrt{2}, 1-\\sqrt{2}", "3, 1 \\pm \\sqrt{2}"], ["3, 1+\\sqrt{2}"]),
    ("text", "\\text{Even}", ["Even", "\\text{even}", "\\textbf{Even}"], ["\\text{Odd}"]),
    ("text", "\\text{Evelyn}", ["\\text{Evelyn}", "Evelyn"], ["\\text{Briana}"]),
    ("text", "\\text{(C)}", ["C", "(C)", "\\text{C}"], ["\\text{(D)}"]),
    ("text", "\\text{neither}", ["\\text{neither}", "\\text{Neither}"], ["\\text{odd}"]),
    ("text", "\\text{Sunday}", ["\\text{Sunday}", "Sunday"], ["\\text{Monday}"]),
    ("equations", "f(y) = y", ["f(y) = y", "f(y)=y"], ["f(y) = 2y"]),
    ("equations", "y = 2x + 3", ["y = 3 + 2x", "y=2x+3"], ["y = 2x - 3"]),
    ("equations", "x^2 + y^2 = 25", ["x^2+y^2=25", "y^2 + x^2 = 25"], ["x^2 + y^2 = 5"]),
    ("equations", "x - 2y + z - 1 = 0", ["x-2y+z-1=0", "x - 2y + z = 1"], ["x - 2y + z + 1 = 0"]),
    ("matrices", "\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}", ["\\begin{pmatrix}1&0\\\\0&1\\end{pmatrix}", "\\begin{bmatrix} 1 & 0 \\\\ 0 & 1 \\end{bmatrix}"], ["\\begin{pmatrix} 0 & 1 \\\\ 1 & 0 \\end{pmatrix}"]),
    ("matrices", "\\begin{pmatrix} 3 \\\\ -1 \\end{pmatrix}", ["\\begin{pmatrix}3\\\\-1\\end{pmatrix}"], ["\\begin{pmatrix} -1 \\\\ 3 \\end{pmatrix}"]),
    ("matrices", "\\begin{pmatrix} 2 & -1 \\\\ 7 & 4 \\end{pmatrix}", ["\\begin{pmatrix}2&-1\\\\7&4\\end{pmatrix}"], ["\\begin{pmatrix} 2 & 1 \\\\ 7 & 4 \\end{pmatrix}"]),
    ("chains", "x = 11", ["x = 5+5+1 = 11", "x = 4 + 7 = 11"], ["x = 4 + 7 = 12"]),
    ("chains", "11", ["x = 4 + 7 = 11", "2 \\cdot 3 + 5 = 11"], ["x = 4 + 7 = 12"]),
    ("chains", "\\frac{1}{3}", ["p = \\frac{2}{6} = \\frac{1}{3}", "x = \\frac{1}{3} \\approx 0.33"], ["p = \\frac{2}{6} = \\frac{1}{6}"]),
    ("units_currency", "18", ["18 \\text{ dollars}", "\\$18", "18\\text{ eggs}"], ["20 \\text{ dollars}"]),
    ("units_currency", "7.5", ["7.5 \\text{ hours}", "7.5\\,\\text{h}"], ["7 \\text{ hours}"]),
    ("units_currency", "150", ["150 \\text{ km}", "150\\text{ kilometers}"], ["160 \\text{ km}"]),
    ("units_currency", "25", ["\\$25", "25 \\text{ cents}"], ["\\$52"]),
    ("separators", "1000000", ["1,000,000", "1\\,000\\,000", "1{,}000{,}000"], ["100000"]),
    ("separators", "1000.99", ["1000,99", "1,000.99"], ["1000.9"]),
    ("separators", "3.5", ["3,5", "3.50"], ["35"]),
    ("separators", "14916", ["14{,}916", "14,916"], ["14, 916"]),
    ("rounding", "\\frac{1}{3}", ["0.3333333", "0.\\overline{3}"], ["0.33", "0.333"]),
    ("rounding", "\\frac{2}{3}", ["0.6666667", "0.666667"], ["0.67", "0.6"]),
    ("rounding", "\\frac{70}{9}", ["7.777778", "7.\\overline{7}"], ["7.78"]),
    ("rounding", "\\sqrt{2}", ["1.414214", "\\sqrt 2"], ["1.41"]),
    ("intervals", "(\\frac{3}{5}, \\frac{8}{3}]", ["(0.6, \\frac{8}{3}]", "\\left(\\frac35, \\frac83\\right]"], ["(0.6, 2.67]", "[0.6, \\frac{8}{3}]"]),
    ("intervals", "[-2, 7]", ["[-2,7]", "x \\in [-2, 7]"], ["(-2, 7)"]),
    ("intervals", "(-\\infty, -3] \\cup [2, \\infty)", ["(-\\infty,-3]\\cup[2,\\infty)"], ["[-3, 2]"]),
    ("intervals", "[0.5, 2.25]", ["[\\frac{1}{2}, \\frac{9}{4}]", "[0.50, 2.25]"], ["[0.5, 2.2]"]),
    ("percent", "20\\%", ["20\\%", "20", "20 \\text{ percent}"], ["25\\%"]),
    ("numbers", "42", ["42", "42.0"], ["24"]),
    ("numbers", "-7", ["-7", "- 7"], ["7"]),
    ("expressions", "3\\sqrt{13}", ["\\sqrt{117}", "3 \\sqrt{13}"], ["13\\sqrt{3}"]),
    ("expressions", "\\frac{\\pi}{4}", ["\\pi/4", "\\frac14\\pi"], ["\\frac{\\pi}{2}"]),
    ("expressions", "x^2 + 7x + 10", ["(x+2)(x+5)", "10 + 7x + x^2"], ["(x+2)(x+4)"]),
    ("tuples", "(7, 6)", ["(7,6)", "\\left(7, 6\\right)"], ["(6, 7)"]),
    ("tuples", "(3, \\frac{\\pi}{2})", ["\\left( 3, \\frac{\\pi}{2} \\right)"], ["(3, \\pi)"]),
]

COT = ("We set up the relations given in the statement and simplify them step by step, "
       "checking every case against the conditions.\n\n")
BOXED = [
    COT + "Therefore, the final answer is $\\boxed{{{a}}}$.",
    COT + "**Final Answer**\n\\[\n\\boxed{{{a}}}\n\\]",
    "<think>\n" + COT + "</think>\nThe answer is $\\boxed{{{a}}}$.",
]
SENTENCES = [  # no marker: the closing sentence's math is the answer
    COT + "Final Answer: The final answer is ${a}$. I hope it is correct.",
    COT + "So the result is ${a}$.",
]
CLOSING = {  # per class, realistic closing sentences without box or marker
    "units_currency": [COT + "So in the end she pays \\${n} in total.", COT + "After all that, Tom ends up with {n} dollars."],
    "matrices": [COT + "The matrix we want is $ {a} $."],
    "separators": [COT + "So the total comes to {a}."],
}


# Issue 26: cases written for each kind of miss the issue names (own cases, not taken from any
# other project's tests): per kind, correct answers, incorrect look-alikes and hedges of that form.
KINDS = "issue26 kinds: cases written for each kind (correct, incorrect look-alikes, hedges)"
KIND_CASES = [  # (kind, class, reference, response, expected)
    # 1. references as datasets write them: Python syntax, thin-space groups, `2=x`, sentences
    ("k1_reference", "reference_syntax", "3*pi", "\\boxed{3\\pi}", 1),
    ("k1_reference", "reference_syntax", "pi/4", "The answer is $\\frac{\\pi}{4}$.", 1),
    ("k1_reference", "reference_syntax", "sqrt(2)/2", "\\boxed{\\frac{\\sqrt{2}}{2}}", 1),
    ("k1_reference", "reference_syntax", "sqrt(x^2+1)", "\\boxed{\\sqrt{1+x^2}}", 1),
    ("k1_reference", "reference_syntax", "3**(1/3)", "\\boxed{\\sqrt[3]{3}}", 1),
    ("k1_reference", "reference_syntax", "x**2 - 4", "\\boxed{(x-2)(x+2)}", 1),
    ("k1_reference", "reference_syntax", "2*sqrt(5)", "\\boxed{\\sqrt{20}}", 1),
    ("k1_reference", "reference_syntax", "(n+1)*n/2", "\\boxed{\\frac{n(n+1)}{2}}", 1),
    ("k1_reference", "reference_syntax", "exp(2)", "\\boxed{e^2}", 1),
    ("k1_reference", "reference_syntax", "12,\\! 345,\\! 678", "\\boxed{12345678}", 1),
    ("k1_reference", "reference_syntax", "1,\\!000", "So the answer is $1000$.", 1),
    ("k1_reference", "reference_syntax", "5=y", "\\boxed{y=5}", 1),
    ("k1_reference", "reference_syntax", "7=n", "\\boxed{7}", 1),
    ("k1_reference", "reference_syntax", "The answer is 42", "\\boxed{42}", 1),
    ("k1_reference", "reference_syntax", "the final answer is 0.4285714", "\\boxed{\\frac{3}{7}}", 1),
    ("k1_reference", "reference_syntax", "3*pi", "\\boxed{3}", 0),
    ("k1_reference", "reference_syntax", "3*pi", "\\boxed{\\pi^3}", 0),
    ("k1_reference", "reference_syntax", "sqrt(2)/2", "\\boxed{\\sqrt{2}}", 0),
    ("k1_reference", "reference_syntax", "3**(1/3)", "\\boxed{1}", 0),
    ("k1_reference", "reference_syntax", "2**10", "\\boxed{20}", 0),
    ("k1_reference", "reference_syntax", "12,\\! 345,\\! 678", "\\boxed{12345}", 0),
    ("k1_reference", "reference_syntax", "12,\\! 345,\\! 678", "\\boxed{678}", 0),
    ("k1_reference", "reference_syntax", "5=y", "\\boxed{y=6}", 0),
    ("k1_reference", "reference_syntax", "7=n", "\\boxed{-7}", 0),
    ("k1_reference", "reference_syntax", "The answer is 42", "\\boxed{24}", 0),
    ("k1_reference", "reference_syntax", "the final answer is 0.4285714", "\\boxed{\\frac{3}{8}}", 0),
    ("k1_reference", "hedge", "12,\\! 345,\\! 678", "\\boxed{12345678} or \\boxed{12345}", 0),
    ("k1_reference", "hedge", "The answer is 42", "\\boxed{42 \\text{ or } 24}", 0),
    ("k1_reference", "hedge", "3*pi", "$\\boxed{3\\pi}$ or $\\boxed{\\pi}$", 0),
    # 2. an answer closing an equation or chain
    ("k2_equation", "equation_claim", "0", "\\boxed{\\lim_{x\\to\\infty} \\frac{1}{x} = 0}", 1),
    ("k2_equation", "equation_claim", "\\frac{n(n+1)(2n+1)}{6}",
     "$\\sum_{k=1}^n k^2 = \\frac{n(n+1)(2n+1)}{6}$", 1),
    ("k2_equation", "equation_claim", "5", "\\boxed{|\\vec u| = 5}", 1),
    ("k2_equation", "equation_claim", "2x", "\\boxed{\\frac{d}{dx} x^2 = 2x}", 1),
    ("k2_equation", "equation_claim", "\\frac{\\pi}{4}", "\\boxed{\\int_0^1 \\frac{dx}{1+x^2} = \\frac{\\pi}{4}}", 1),
    ("k2_equation", "equation_claim", "13", "Hence $\\|\\vec a + \\vec b\\| = 13$.", 1),
    ("k2_equation", "equation_claim", "1", "\\boxed{\\lim_{x\\to\\infty} \\frac{1}{x} = 0}", 0),
    ("k2_equation", "equation_claim", "\\frac{n(n+1)}{2}", "$\\sum_{k=1}^n k^2 = \\frac{n(n+1)(2n+1)}{6}$", 0),
    ("k2_equation", "equation_claim", "4", "\\boxed{1 + 2 = 4}", 0),
    ("k2_equation", "equation_claim", "5", "\\boxed{2 + 2 = 5}", 0),
    ("k2_equation", "equation_claim", "|\\vec u|", "\\boxed{|\\vec u| = 5}", 0),
    ("k2_equation", "equation_claim", "7", "\\boxed{x + y = 12}", 0),
    ("k2_equation", "hedge", "0", "\\boxed{\\lim_{x\\to 0} f(x) = 0 \\text{ or } 1}", 0),
    ("k2_equation", "hedge", "5", "$\\boxed{|\\vec u| = 5}$ or $\\boxed{|\\vec u| = 6}$", 0),
    ("k2_equation", "hedge", "1", "\\boxed{0.5} = \\boxed{1}", 0),
    ("k2_equation", "hedge", "\\frac13", "\\boxed{0.5} = \\boxed{\\frac13}", 0),
    ("k2_equation", "hedge", "2", "$\\boxed{2} < \\boxed{3}$", 0),
    ("k2_equation", "hedge", "3", "\\boxed{3} \\approx \\boxed{3.1}", 0),
    ("k2_equation", "hedge", "\\frac13", "$\\boxed{\\frac13} \\neq \\boxed{0.5}$", 0),
    # 3. an exact value followed by its approximation: the exact value is the claim
    ("k3_approx", "approximation", "\\frac{\\sqrt{2}}{2}", "\\boxed{\\frac{\\sqrt{2}}{2} \\approx 0.707}", 1),
    ("k3_approx", "approximation", "\\pi", "\\boxed{\\pi \\approx 3.14}", 1),
    ("k3_approx", "approximation", "2\\sqrt{3}", "The answer is $2\\sqrt{3} \\approx 3.46$.", 1),
    ("k3_approx", "approximation", "\\frac{1}{7}", "\\boxed{\\frac{1}{7} \\approx 0.143}", 1),
    ("k3_approx", "approximation", "e^2", "\\boxed{e^2 \\approx 7.39}", 1),
    ("k3_approx", "approximation", "3.46", "\\boxed{d \\approx 3.46}", 1),
    ("k3_approx", "approximation", "\\frac{1}{8}", "\\boxed{\\frac{1}{7} \\approx 0.125}", 0),
    ("k3_approx", "approximation", "3.15", "\\boxed{\\pi \\approx 3.14}", 0),
    ("k3_approx", "approximation", "\\sqrt{3}", "\\boxed{2\\sqrt{3} \\approx 3.46}", 0),
    ("k3_approx", "approximation", "7.39", "\\boxed{e^3 \\approx 20.09}", 0),
    ("k3_approx", "hedge", "\\pi", "\\boxed{\\pi \\text{ or } 3.14}", 0),
    ("k3_approx", "hedge", "5", "\\boxed{5 (\\approx 6)}", 0),
    ("k3_approx", "hedge", "\\frac{1}{7}", "$\\boxed{\\frac{1}{7}} \\approx \\boxed{0.143}$", 0),
    # 4. percent words and units
    ("k4_percent_units", "percent_units", "0.42", "The answer is 42 percent.", 1),
    ("k4_percent_units", "percent_units", "0.125", "\\boxed{12.5 pct}", 1),
    ("k4_percent_units", "percent_units", "0.0025", "\\boxed{\\frac14\\text{ percent}}", 1),
    ("k4_percent_units", "percent_units", "25\\%", "\\boxed{25 \\text{ percent}}", 1),
    ("k4_percent_units", "percent_units", "36", "\\boxed{36 m^2}", 1),
    ("k4_percent_units", "percent_units", "8", "\\boxed{8 \\text{ cm}^3}", 1),
    ("k4_percent_units", "percent_units", "50", "\\boxed{50 km^2}", 1),
    ("k4_percent_units", "percent_units", "60", "The answer is [60 degrees].", 1),
    ("k4_percent_units", "percent_units", "0.42", "The answer is 24 percent.", 0),
    ("k4_percent_units", "percent_units", "0.125", "\\boxed{125 pct}", 0),
    ("k4_percent_units", "percent_units", "0.0025", "\\boxed{\\frac12\\text{ percent}}", 0),
    ("k4_percent_units", "percent_units", "36", "\\boxed{6 m^2}", 0),
    ("k4_percent_units", "percent_units", "60", "The answer is [30 degrees].", 0),
    ("k4_percent_units", "hedge", "0.42", "The answer is 42 percent or 24 percent.", 0),
    ("k4_percent_units", "hedge", "36", "\\boxed{36 m^2 \\text{ or } 6 m^2}", 0),
    ("k4_percent_units", "hedge", "60", "The answer is [60 or 30 degrees].", 0),
    # 5. answers in prose in other languages, no box
    ("k5_languages", "languages", "12", "我们把两个数相加。所以，答案是12", 1),
    ("k5_languages", "languages", "x+1", "化简后得到结果。答案为 x+1", 1),
    ("k5_languages", "languages", "\\frac{3}{5}", "比例为3/5", 1),
    ("k5_languages", "languages", "3/5", "所以概率是 3/5。", 1),
    ("k5_languages", "languages", "0.5", "最终答案：0.5", 1),
    ("k5_languages", "languages", "15", "Réponse : il faut 15 billes.", 1),
    ("k5_languages", "languages", "220", "Donc la réponse est 220 $.", 1),
    ("k5_languages", "languages", "7", "La respuesta es 7.", 1),
    ("k5_languages", "languages", "9", "Die Antwort ist 9.", 1),
    ("k5_languages", "languages", "12", "所以，答案是21", 0),
    ("k5_languages", "languages", "x+1", "答案为 x-1", 0),
    ("k5_languages", "languages", "\\frac{3}{5}", "比例为5/3", 0),
    ("k5_languages", "languages", "15", "Réponse : il faut 16 billes.", 0),
    ("k5_languages", "languages", "7", "La respuesta es 8.", 0),
    ("k5_languages", "hedge", "12", "所以，答案是12或13", 0),
    ("k5_languages", "hedge", "15", "Réponse : 15 ou 16.", 0),
    ("k5_languages", "hedge", "9", "Die Antwort ist 9 oder 10.", 0),
    # 6. multiple choice: ruled-out alternatives, option text in the reference
    ("k6_choice", "choice", "C", "The answer is C; it cannot be A.", 1),
    ("k6_choice", "choice", "B", "I choose B, not D.", 1),
    ("k6_choice", "choice", "A", "答案是A，不是C。", 1),
    ("k6_choice", "choice", "D", "La bonne réponse est D et non B.", 1),
    ("k6_choice", "choice", "(B) 12", "\\boxed{B}", 1),
    ("k6_choice", "choice", "(E) Monday", "The answer is (E).", 1),
    ("k6_choice", "choice", "C", "The answer is A; it cannot be C.", 0),
    ("k6_choice", "choice", "B", "I choose D, not B.", 0),
    ("k6_choice", "choice", "A", "答案是C，不是A。", 0),
    ("k6_choice", "choice", "(B) 12", "\\boxed{C}", 0),
    ("k6_choice", "choice", "(E) Monday", "The answer is (D).", 0),
    ("k6_choice", "hedge", "C", "The answer is C or D, not A.", 0),
    ("k6_choice", "hedge", "B", "B or C, but not A", 0),
    ("k6_choice", "hedge", "A", "答案是A或B，不是C。", 0),
    # 7. forms of the same object
    ("k7_forms", "forms", "\\begin{pmatrix}1 & 0\\\\0 & 1\\end{pmatrix}",
     "\\boxed{\\begin{bmatrix}1 & 0\\\\0 & 1\\end{bmatrix}}", 1),
    ("k7_forms", "forms", "\\begin{bmatrix}0.5 & 0.25\\end{bmatrix}",
     "\\boxed{\\begin{pmatrix}\\frac12 & \\frac14\\end{pmatrix}}", 1),
    ("k7_forms", "forms", "\\begin{pmatrix}2\\\\3\\end{pmatrix}", "\\boxed{\\begin{matrix}2\\\\3\\end{matrix}}", 1),
    ("k7_forms", "forms", "(x+3)(x-2)", "\\boxed{(x-2)(x+3)}", 1),
    ("k7_forms", "forms", "(a-b)(a+b)", "\\boxed{(b+a)(a-b)}", 1),
    ("k7_forms", "forms", "y + y + y", "\\boxed{3y}", 1),
    ("k7_forms", "forms", "0.14285714", "\\boxed{0.1428571}", 1),
    ("k7_forms", "forms", "0.0833333", "\\boxed{0.083333349}", 1),
    ("k7_forms", "forms", "2.7182818", "\\boxed{2.718282}", 1),
    ("k7_forms", "forms", "\\begin{pmatrix}1 & 0\\\\0 & 1\\end{pmatrix}",
     "\\boxed{\\begin{bmatrix}0 & 1\\\\1 & 0\\end{bmatrix}}", 0),
    ("k7_forms", "forms", "\\begin{bmatrix}0.5 & 0.25\\end{bmatrix}",
     "\\boxed{\\begin{pmatrix}\\frac14 & \\frac12\\end{pmatrix}}", 0),
    ("k7_forms", "forms", "(x+3)(x-2)", "\\boxed{(x+2)(x-3)}", 0),
    ("k7_forms", "forms", "y + y + y", "\\boxed{y^3}", 0),
    ("k7_forms", "forms", "0.14285714", "\\boxed{0.1428}", 0),
    ("k7_forms", "forms", "0.0833333", "\\boxed{0.083334}", 0),
    ("k7_forms", "forms", "2.7182818", "\\boxed{2.71}", 0),
    ("k7_forms", "forms", "3", "\\boxed{3.0000001}", 0),
    ("k7_forms", "hedge", "(x+3)(x-2)", "\\boxed{(x-2)(x+3) \\text{ or } (x+2)(x-3)}", 0),
    ("k7_forms", "hedge", "0.14285714", "$\\boxed{0.1428571}$ or $\\boxed{0.1428}$", 0),
    # 8. equivalences only a symbolic check decides (trigonometry, complex numbers)
    ("k8_identities", "identities", "\\sin x", "\\boxed{\\cos(90^\\circ - x)}", 1),
    ("k8_identities", "identities", "1", "\\boxed{\\sin^2 x + \\cos^2 x}", 1),
    ("k8_identities", "identities", "\\cos 2x", "\\boxed{\\cos^2 x - \\sin^2 x}", 1),
    ("k8_identities", "identities", "3+4i", "\\boxed{(2+i)^2}", 1),
    ("k8_identities", "identities", "2-i", "\\boxed{\\frac{5}{2+i}}", 1),
    ("k8_identities", "identities", "\\tan x", "\\boxed{\\frac{\\sin x}{\\cos x}}", 1),
    ("k8_identities", "identities", "\\sin x", "\\boxed{\\cos x}", 0),
    ("k8_identities", "identities", "\\cos 2x", "\\boxed{\\cos^2 x + \\sin^2 x}", 0),
    ("k8_identities", "identities", "3+4i", "\\boxed{(2-i)^2}", 0),
    ("k8_identities", "identities", "2-i", "\\boxed{\\frac{5}{2-i}}", 0),
    ("k8_identities", "identities", "\\tan x", "\\boxed{\\frac{\\cos x}{\\sin x}}", 0),
    ("k8_identities", "identities", "1", "\\boxed{\\sin^2 x}", 0),
    ("k8_identities", "hedge", "3+4i", "\\boxed{3+4i \\text{ or } 3-4i}", 0),
    ("k8_identities", "hedge", "\\sin x", "$\\boxed{\\sin x}$ or $\\boxed{\\cos x}$", 0),
    # an empty box after the answer in prose: the box the format asks for holds nothing
    ("empty_box", "hedge", "7", "The answer is 7. \\boxed{}", 0),
    ("empty_box", "hedge", "7", "So $x = 7$. Final answer: $\\boxed{}$", 0),
    ("empty_box", "hedge", "7", "\\boxed{7} and then \\boxed{ }", 0),
    ("k6_choice", "choice", "A", "The answer is not B, not C, not D.", 0),
    ("k6_choice", "choice", "B", "It is A, not B.", 0),
    ("k2_equation", "equation_claim", "5", "\\boxed{f(2) = 5}", 1),
    ("k2_equation", "equation_claim", "5", "\\boxed{f(2) = 6}", 0),
    ("k2_equation", "equation_claim", "\\frac{1}{2}", "\\boxed{P(A) = \\frac{1}{2}}", 1),
    ("k8_identities", "identities", "2i", "\\boxed{\\sqrt{-4}}", 1),
    ("k8_identities", "identities", "1", "\\boxed{i}", 0),
    ("k8_identities", "identities", "-1", "\\boxed{e^{i\\pi}}", 1),
    ("k8_identities", "identities", "\\frac{\\sqrt{3}}{2}", "\\boxed{\\sin 60^\\circ}", 1),
    ("k8_identities", "identities", "\\frac{1}{2}", "\\boxed{\\sin 60^\\circ}", 0),
    ("k1_reference", "reference_syntax", "The answer is $\\frac{2}{3}$", "\\boxed{\\frac23}", 1),
    ("k1_reference", "reference_syntax", "The answer is $\\frac{2}{3}$", "\\boxed{\\frac32}", 0),
    ("k2_equation", "equation_claim", "5", "\\boxed{AB = 5}", 1),
    ("k2_equation", "equation_claim", "12", "\\boxed{\\text{Area} = 12}", 1),
    ("k2_equation", "equation_claim", "4", "\\boxed{\\log_2 8 = 4}", 0),
    ("k5_languages", "languages", "12", "答案是：12", 1),
    ("k5_languages", "languages", "9", "Die Antwort lautet 9.", 1),
    ("k5_languages", "languages", "9", "Die Antwort lautet 8.", 0),
    ("k5_languages", "languages", "9", "Ответ: 9", 1),
    ("k6_choice", "choice", "B", "故选：B", 1),
    ("k6_choice", "choice", "B", "故选：C", 0),
    ("k6_choice", "choice", "D", "Answer: D) Alina", 1),
    ("k6_choice", "choice", "D", "Answer: C) Alina", 0),
    ("k6_choice", "choice", "B", "The correct choice is B.", 1),
    ("k6_choice", "choice", "B", "Therefore C.", 0),
    ("k6_choice", "hedge", "B", "The correct choice is B or C.", 0),
    ("k8_identities", "identities", "2", "\\boxed{(1+i)(1-i)}", 1),
    ("k8_identities", "identities", "2", "\\boxed{(1+i)(1+i)}", 0),
    ("k8_identities", "identities", "1", "\\boxed{\\tan 45^\\circ}", 1),
    ("k8_identities", "identities", "1", "\\boxed{\\tan 60^\\circ}", 0),
    ("k8_identities", "identities", "-\\cos x", "\\boxed{\\cos(\\pi - x)}", 1),
    ("k7_forms", "forms", "\\begin{pmatrix}1 & 2\\\\3 & 4\\end{pmatrix}",
     "\\boxed{\\left[\\begin{array}{cc}1 & 2\\\\3 & 4\\end{array}\\right]}", 1),
    ("k1_reference", "reference_syntax", "10^(-3)", "\\boxed{0.001}", 1),
    ("k1_reference", "reference_syntax", "10^(-3)", "\\boxed{0.01}", 0),
    ("k1_reference", "reference_syntax", "Answer: 12", "\\boxed{12}", 1),
    ("k1_reference", "reference_syntax", "Answer: 12", "\\boxed{13}", 0),
    ("k1_reference", "reference_syntax", "3x+1=y", "\\boxed{y = 3x + 1}", 1),
    ("k1_reference", "reference_syntax", "11111100", "\\boxed{11,\\!111,\\!100}", 1),
    ("k2_equation", "equation_claim", "45", "\\boxed{\\angle ABC = 45^\\circ}", 1),
    ("k4_percent_units", "percent_units", "10", "\\boxed{10 \\mathrm{cm}^2}", 1),
    ("k5_languages", "languages", "12", "La réponse est donc 12.", 1),
    ("k5_languages", "languages", "12", "La réponse est donc 13.", 0),
    ("k5_languages", "hedge", "12", "The answer is therefore 12 or 13.", 0),
    ("k6_choice", "choice", "B", "Answer: (B) and not (C)", 1),
    ("k6_choice", "choice", "D", "Answer: (B) and not (C)", 0),
    ("k6_choice", "choice", "A", "Let me think about it.\nA nice problem, but I cannot finish it.", 0),
    ("k6_choice", "choice", "A", "Checking each option, A is correct.", 1),
    ("k8_identities", "identities", "\\frac12", "\\boxed{\\sin 30^\\circ}", 1),
    ("k8_identities", "identities", "5", "\\boxed{|3+4i|}", 1),
    ("k8_identities", "identities", "-i", "\\boxed{\\frac{1}{i}}", 1),
    ("k8_identities", "identities", "i", "\\boxed{\\frac{1}{i}}", 0),
    ("k8_identities", "identities", "\\cos x", "\\boxed{\\frac{\\sin 2x}{2\\sin x}}", 1),
    ("k1_reference", "reference_syntax", "**5**", "\\boxed{5}", 1),  # markdown bold is no power
    ("k1_reference", "reference_syntax", "(1+x)**2", "\\boxed{x^2+2x+1}", 1),
]


def _rows() -> list[dict]:
    rows: list[dict] = []

    def add(source, test, cls, ref, resp, expected):
        rows.append({"id": f"{len(rows):04d}", "source": source, "test": test, "class": cls,
                     "reference": ref, "response": resp, "expected": int(expected)})

    for test, cls, gold, pred, exp in MATH_VERIFY:
        add(MV, test, cls, gold, pred, exp)
    for source, pairs in ((HENDRYCKS, HENDRYCKS_PAIRS), (QWEN, QWEN_PAIRS)):
        for test, cls, ref, pred, exp in pairs:  # answer-level graders: the answer sits in a box
            add(source, test, cls, ref, f"The answer is $\\boxed{{{pred.strip()}}}$.", exp)
    for cls, ref, rights, wrongs in SHAPE_ITEMS:
        for i, a in enumerate(rights):
            add(SHAPES, "boxed", cls, ref, BOXED[i % len(BOXED)].format(a=a), 1)
            add(SHAPES, "boxed", cls, ref, BOXED[(i + 1) % len(BOXED)].format(a=a), 1)
            add(SHAPES, "sentence", cls, ref, SENTENCES[i % len(SENTENCES)].format(a=a), 1)
        for i, a in enumerate(wrongs):
            add(SHAPES, "boxed", cls, ref, BOXED[i % len(BOXED)].format(a=a), 0)
            add(SHAPES, "sentence", cls, ref, SENTENCES[i % len(SENTENCES)].format(a=a), 0)
        for template in CLOSING.get(cls, []):
            number = rights[-1] if cls == "separators" else ref
            if cls == "units_currency":
                add(SHAPES, "closing", cls, ref, template.format(n=ref), 1)
                add(SHAPES, "closing", cls, ref, template.format(n=ref + "1"), 0)
            else:
                add(SHAPES, "closing", cls, ref, template.format(a=number), 1)
                add(SHAPES, "closing", cls, ref, template.format(a=wrongs[0]), 0)
    # Every reference also against the answer to another problem of the same class (wrong).
    for k, (cls, ref, _, _) in enumerate(SHAPE_ITEMS):
        other = next((item for item in SHAPE_ITEMS[k + 1:] + SHAPE_ITEMS[:k] if item[0] == cls), None)
        if other is None or cls == "chains":  # the chain items share their value on purpose
            continue
        add(SHAPES, "other_problem", cls, ref, BOXED[k % len(BOXED)].format(a=other[2][0]), 0)
    for test, cls, ref, resp, exp in KIND_CASES:  # appended last: earlier ids stay as they were
        add(KINDS, test, cls, ref, resp, exp)
    return rows


def main() -> None:
    out = Path(__file__).with_name("math_truth.jsonl")
    with out.open("w", encoding="utf-8") as fh:
        for row in _rows():
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
