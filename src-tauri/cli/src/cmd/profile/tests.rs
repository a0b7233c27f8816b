use super::*;

#[test]
fn an_evaluation_is_named_by_its_file_and_the_prompts_asked_where_fewer_than_it_holds() {
    let file = Path::new("../shared/fixtures/evals/gsm8k-test-first40.jsonl");
    // No --max, or `--max 50` over a file of 40: all 40 asked, one name.
    assert_eq!(eval_name(file, 40, 40), "gsm8k-test-first40");
    assert_eq!(eval_name(file, 10, 40), "gsm8k-test-first40 (first 10)");
}

#[test]
fn each_grader_and_source_is_listed_once_in_order() {
    assert_eq!(
        summary::sorted_once(["b", "a", "b"].into_iter()),
        ["a", "b"]
    );
}
