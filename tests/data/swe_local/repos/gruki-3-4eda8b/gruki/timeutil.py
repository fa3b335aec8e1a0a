"""Calendar and clock helpers; dates are (year, month, day) and times are minutes."""


def is_leap_year(year: int) -> bool:
    """Tell whether ``year`` is a leap year of the Gregorian calendar: every fourth year,
    except whole centuries, which are leap years only when divisible by 400.

    ``is_leap_year(2024)`` and ``is_leap_year(2000)`` are true; ``is_leap_year(1900)`` is not.
    """
    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0


def weeks_left(year: int, month: int, day: int) -> int:
    """Return how many weeks of the year come after the week of the given date, with weeks
    numbered as ``week_number`` does them; ``0`` in the last week of December.

    ``weeks_left(2023, 12, 24)`` is ``1`` and ``weeks_left(2023, 1, 1)`` is ``52``.
    """
    return week_number(year, 12, 31) - week_number(year, month, day)


def week_number(year: int, month: int, day: int) -> int:
    """Return the week of its year a date falls in: January 1st to 7th are week 1, the 8th
    to the 14th week 2, and so on.

    ``week_number(2023, 1, 8)`` is ``2`` and ``week_number(2023, 12, 31)`` is ``53``.
    """
    return (day_of_year(year, month, day) - 1) // 7 + 1


def day_of_year(year: int, month: int, day: int) -> int:
    """Return the position of a date in its year, ``1`` for January 1st.

    ``day_of_year(2023, 3, 1)`` is ``60``; in a leap year, such as 2024, it is ``61``.
    """
    total = day
    for earlier in range(1, month):
        total += days_in_month(year, earlier)
    return total


def days_in_month(year: int, month: int) -> int:
    """Return the number of days of ``month`` (1 to 12) in ``year``; February has 29 days
    in leap years and 28 otherwise.

    ``days_in_month(2023, 2)`` is ``28`` and ``days_in_month(2023, 4)`` is ``30``.
    """
    if month == 2:
        if is_leap_year(year):
            return 29
        return 28
    if month in (4, 6, 9, 11):
        return 30
    return 31
