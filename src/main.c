/* main.c - placeholder until the CLI lands. */
#include <stdio.h>
int main(void)
{
    puts("agentsched " AGENTSCHED_VERSION);
    return 0;
}
