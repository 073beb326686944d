use luhn::is_valid;

#[test]
fn valid_numbers() {
    for number in ["4539 3195 0343 6467", "059", "0 0", " 5 9 ", "095 245 88", "234 567 891 234", "091"] {
        assert!(is_valid(number), "{number:?} is valid");
    }
}

#[test]
fn invalid_numbers() {
    for number in ["8273 1232 7352 0569", "1", "0", " ", "", "055-444-285", "055a 444 285", "59%59", "055 444 286", "٣"] {
        assert!(!is_valid(number), "{number:?} is not valid");
    }
}
